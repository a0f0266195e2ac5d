#include "templates/line_tokens.hh"

#include <xxhash.h>

#include "prompt_text/encoder.hh"

namespace ic::templates {
namespace {

// As stable_cut (stable_prefix.cc): a position right after '\n' at a
// printable ASCII character other than space.
bool cut_at(std::string_view text, std::size_t c) {
  return c > 0 && c < text.size() && text[c - 1] == '\n' && text[c] > ' ' && text[c] < 0x7f;
}

}  // namespace

std::size_t piece_end(std::string_view text, std::size_t from) {
  std::size_t c = from + LineTokens::kMinPieceBytes;
  while (c < text.size()) {
    const std::size_t nl = text.find('\n', c - 1);
    if (nl == std::string_view::npos || nl + 1 >= text.size()) return text.size();
    c = nl + 1;
    if (cut_at(text, c)) return c;
    ++c;  // the next '\n' at or after c
  }
  return text.size();
}

LineTokens& LineTokens::local() {
  thread_local LineTokens cache;
  return cache;
}

tokenizer::EncodeStatus LineTokens::encode(const tokenizer::Tokenizer& tokenizer,
                                           std::string_view text,
                                           std::vector<tokenizer::TokenId>& out,
                                           const std::function<bool()>& expired) {
  out.clear();
  for (std::size_t from = 0; from < text.size();) {
    if (expired && expired()) return tokenizer::EncodeStatus::kDeadline;
    const std::size_t to = piece_end(text, from);
    const auto status = encode_piece(tokenizer, text.substr(from, to - from), out, expired);
    if (status != tokenizer::EncodeStatus::kOk) return status;
    from = to;
  }
  return tokenizer::EncodeStatus::kOk;
}

tokenizer::EncodeStatus LineTokens::encode_piece(const tokenizer::Tokenizer& tokenizer,
                                                 std::string_view piece,
                                                 std::vector<tokenizer::TokenId>& out,
                                                 const std::function<bool()>& expired) {
  const XXH128_hash_t h = XXH3_128bits(piece.data(), piece.size());
  // Two ways: the piece's slot pair {i, i ^ 1}.
  const std::size_t i = h.low64 % kSlots;
  const auto holds = [&](const Slot& s) {
    return s.tokenizer == &tokenizer && s.low == h.low64 && s.high == h.high64;
  };
  for (const std::size_t at : {i, i ^ 1}) {
    if (holds(slots_[at])) {
      ++hits_;
      out.insert(out.end(), slots_[at].ids.begin(), slots_[at].ids.end());
      return tokenizer::EncodeStatus::kOk;
    }
  }
  // A miss goes to an empty way, else to the way the hash picks.
  Slot& slot = slots_[slots_[i].tokenizer == nullptr       ? i
                      : slots_[i ^ 1].tokenizer == nullptr ? i ^ 1
                      : (h.high64 & 1) != 0                ? i ^ 1
                                                           : i];
  ++misses_;
  const auto status = tokenizer.encode(piece, prompt_text::thread_workspace(), scratch_, expired);
  if (status != tokenizer::EncodeStatus::kOk) return status;
  out.insert(out.end(), scratch_.begin(), scratch_.end());
  // Replace the slot's piece when the bound allows (else keep the older one).
  const std::size_t held = cached_ids_ - slot.ids.size();
  if (held + scratch_.size() <= kMaxCachedIds) {
    cached_ids_ = held + scratch_.size();
    slot.ids.assign(scratch_.begin(), scratch_.end());
    slot.low = h.low64;
    slot.high = h.high64;
    slot.tokenizer = &tokenizer;
  }
  return status;
}

}  // namespace ic::templates
