#include "sharding/lookup_request_view.hh"

#include <cstring>

namespace ic::sharding::wire {
namespace {

// The tags (field number << 3 | wire type) of LookupRouteRequest's fields
// (docs/contract.md), all one byte. Wire types: 0 varint, 2 length-delimited.
enum Tag : std::uint8_t {
  kModelId = 1 << 3 | 2,
  kTenantId = 2 << 3 | 2,
  kPrefixHash = 3 << 3 | 2,
  kPrefixTokenCount = 4 << 3 | 0,
  kHashScheme = 5 << 3 | 2,
  kSlo = 6 << 3 | 2,
  kBlockHashes = 7 << 3 | 2,
  kBlockTokenCount = 8 << 3 | 0,   // unpacked element
  kBlockTokenCounts = 8 << 3 | 2,  // packed run
  kTokenId = 9 << 3 | 0,
  kTokenIds = 9 << 3 | 2,
  kPromptText = 10 << 3 | 2,
  kAdapterId = 11 << 3 | 2,
};
// SLO's fields: ttft_ms = 1, tbt_ms = 2 (both varint).
constexpr std::uint8_t kSloTtftMs = 1 << 3 | 0;
constexpr std::uint8_t kSloTbtMs = 2 << 3 | 0;

// A cursor over wire bytes; every read fails at the end of the bytes.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  bool done() const { return p_ == end_; }
  std::uint8_t byte() { return static_cast<std::uint8_t>(*p_++); }  // precondition: !done()

  // A varint of at most 5 bytes (every int32/uint32 protobuf writes for a
  // non-negative value); longer ones are left to protobuf.
  bool varint(std::uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 35; shift += 7) {
      if (p_ == end_) return false;
      const std::uint8_t b = byte();
      v |= std::uint64_t{b & 0x7Fu} << shift;
      if (b < 0x80) return true;
    }
    return false;
  }

  // A length-delimited field's contents.
  bool bytes(std::string_view& out) {
    std::uint64_t n = 0;
    if (!varint(n) || n > static_cast<std::uint64_t>(end_ - p_)) return false;
    out = {p_, static_cast<std::size_t>(n)};
    p_ += n;
    return true;
  }

 private:
  const char* p_;
  const char* end_;
};

// protobuf's int32/uint32 of a varint: its low 32 bits.
std::uint32_t low32(std::uint64_t v) { return static_cast<std::uint32_t>(v); }

// ASCII is valid UTF-8; any other byte leaves the check to protobuf. Eight
// bytes at a time: names and ids are 8–64 bytes.
bool ascii(std::string_view s) {
  constexpr std::uint64_t kHighBits = 0x8080808080808080u;
  std::uint64_t high = 0;
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, s.data() + i, 8);
    high |= word;
  }
  for (; i < s.size(); ++i) high |= static_cast<unsigned char>(s[i]);
  return (high & kHighBits) == 0;
}

bool string_field(Reader& r, std::string_view& out) { return r.bytes(out) && ascii(out); }

// A repeated int32/uint32 field: one element (wire type 0) or a packed run
// of them (wire type 2); both append, as protobuf does.
template <typename T>
bool ints(Reader& r, std::uint8_t tag, std::vector<T>& out) {
  std::uint64_t v = 0;
  if ((tag & 7) == 0) {
    if (!r.varint(v)) return false;
    out.push_back(static_cast<T>(low32(v)));
    return true;
  }
  std::string_view run;
  if (!r.bytes(run)) return false;
  Reader values(run);
  while (!values.done()) {
    if (!values.varint(v)) return false;
    out.push_back(static_cast<T>(low32(v)));
  }
  return true;
}

bool int32_field(Reader& r, std::int32_t& out) {
  std::uint64_t v = 0;
  if (!r.varint(v)) return false;
  out = static_cast<std::int32_t>(low32(v));
  return true;
}

// An SLO occurrence merges into the previous ones (a field it carries wins).
bool slo(Reader& r, std::int32_t& ttft_ms) {
  std::string_view body;
  if (!r.bytes(body)) return false;
  Reader fields(body);
  std::int32_t ignored = 0;
  while (!fields.done()) {
    const std::uint8_t tag = fields.byte();
    if (tag != kSloTtftMs && tag != kSloTbtMs) return false;
    if (!int32_field(fields, tag == kSloTtftMs ? ttft_ms : ignored)) return false;
  }
  return true;
}

// Where a UTF-8 string field of tag `tag` goes; nullptr for other tags.
std::string_view* text_field(std::uint8_t tag, LookupRequestView& out,
                             std::string_view& prompt_text) {
  switch (tag) {
    case kModelId:
      return &out.model_id;
    case kTenantId:
      return &out.tenant_id;
    case kHashScheme:
      return &out.hash_scheme;
    case kAdapterId:
      return &out.adapter_id;
    case kPromptText:
      return &prompt_text;
    default:
      return nullptr;
  }
}

// One field of the message at `r`; false: not on the fast path.
bool field(Reader& r, LookupRequestView& out, std::string_view& prompt_text) {
  const std::uint8_t tag = r.byte();
  if (std::string_view* text = text_field(tag, out, prompt_text)) return string_field(r, *text);
  switch (tag) {
    case kPrefixHash:
      return r.bytes(out.prefix_hash);
    case kPrefixTokenCount:
      return int32_field(r, out.prefix_token_count);
    case kSlo:
      return slo(r, out.slo_ttft_ms);
    case kBlockHashes:
      return r.bytes(out.block_hashes.emplace_back());
    case kBlockTokenCount:
    case kBlockTokenCounts:
      return ints(r, tag, out.block_token_counts);
    case kTokenId:
    case kTokenIds:
      return ints(r, tag, out.token_ids);
    default:
      return false;  // unknown field, other wire type, or a tag longer than a byte
  }
}

}  // namespace

void LookupRequestView::clear() {
  model_id = tenant_id = prefix_hash = hash_scheme = adapter_id = {};
  prefix_token_count = 0;
  slo_ttft_ms = 0;
  block_hashes.clear();
  block_token_counts.clear();
  token_ids.clear();
}

bool decode(std::span<const char> bytes, LookupRequestView& out) {
  out.clear();
  Reader r(std::string_view(bytes.data(), bytes.size()));
  std::string_view prompt_text;
  while (!r.done()) {
    if (!field(r, out, prompt_text)) return false;
  }
  return prompt_text.empty();
}

index::LookupQuery to_query(const LookupRequestView& view) {
  return {.tenant_id = view.tenant_id,
          .model_id = view.model_id,
          .hash_scheme = view.hash_scheme,
          .adapter_id = view.adapter_id,
          .prefix_hash = view.prefix_hash,
          .prefix_token_count = view.prefix_token_count,
          .block_hashes = view.block_hashes,
          .block_token_counts = view.block_token_counts,
          .token_ids = view.token_ids,
          .has_prompt_text = false,
          .slo_ttft_ms = view.slo_ttft_ms};
}

}  // namespace ic::sharding::wire
