#include "replication/record.hh"

#include <charconv>

namespace ic::replication {

state_pb::ReplicationRecord RecordEncoder::start(std::int64_t now_wall_us,
                                                 std::uint64_t* sequence) {
  state_pb::ReplicationRecord record;
  record.set_format_version(kRecordFormatVersion);
  record.set_origin(origin_);
  *sequence = next_.fetch_add(1, std::memory_order_relaxed);
  record.set_origin_sequence(*sequence);
  record.set_accepted_at_us(now_wall_us);
  return record;
}

namespace {

void put_varint(std::string* out, std::uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void put_tag(std::string* out, int field, int wire_type) {
  put_varint(out, static_cast<std::uint64_t>(field) << 3 | static_cast<std::uint64_t>(wire_type));
}

}  // namespace

RecordEncoder::RecordEncoder(std::string origin) : origin_(std::move(origin)) {
  state_pb::ReplicationRecord head;
  head.set_format_version(kRecordFormatVersion);
  head.set_origin(origin_);
  head_ = head.SerializeAsString();
}

// The record's fields 1-4, then `change` as length-delimited field `field`:
// the bytes SerializeAsString() gives with the change set (fields serialize
// in number order, zero scalars left out), written straight into one string
// on the accepting reactor: no record message, one size pass over the change.
std::string RecordEncoder::with_change(int field, const google::protobuf::MessageLite& change,
                                       std::int64_t now_wall_us, std::uint64_t* sequence) {
  *sequence = next_.fetch_add(1, std::memory_order_relaxed);
  const std::size_t size = change.ByteSizeLong();
  std::string out;
  out.reserve(head_.size() + 32 + size);
  out.append(head_);
  put_tag(&out, state_pb::ReplicationRecord::kOriginSequenceFieldNumber, 0);
  put_varint(&out, *sequence);
  if (now_wall_us != 0) {
    put_tag(&out, state_pb::ReplicationRecord::kAcceptedAtUsFieldNumber, 0);
    put_varint(&out, static_cast<std::uint64_t>(now_wall_us));
  }
  put_tag(&out, field, 2);
  put_varint(&out, size);
  const std::size_t at = out.size();
  out.resize(at + size);
  change.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(out.data() + at));
  return out;
}

std::string RecordEncoder::encode(const pb::CacheStateUpdate& update, std::int64_t now_wall_us,
                                  std::uint64_t* sequence) {
  return with_change(state_pb::ReplicationRecord::kUpdateFieldNumber, update, now_wall_us,
                     sequence);
}

std::string RecordEncoder::encode(const pb::CacheEvent& event, std::int64_t now_wall_us,
                                  std::uint64_t* sequence) {
  return with_change(state_pb::ReplicationRecord::kEventFieldNumber, event, now_wall_us, sequence);
}

std::string RecordEncoder::encode_policy(std::string_view policy_json, std::int64_t now_wall_us,
                                         std::uint64_t* sequence) {
  state_pb::ReplicationRecord record = start(now_wall_us, sequence);
  record.set_policy_json(std::string(policy_json));
  return record.SerializeAsString();
}

std::string RecordEncoder::encode_templates(std::string_view templates_json,
                                            std::int64_t now_wall_us, std::uint64_t* sequence) {
  state_pb::ReplicationRecord record = start(now_wall_us, sequence);
  record.set_templates_json(std::string(templates_json));
  return record.SerializeAsString();
}

std::string message_id(std::string_view origin, std::uint64_t sequence) {
  std::string id(origin);
  id += ':';
  id += std::to_string(sequence);
  return id;
}

std::uint64_t sequence_of(std::string_view message_id, std::string_view origin) {
  if (message_id.size() <= origin.size() + 1 || !message_id.starts_with(origin) ||
      message_id[origin.size()] != ':') {
    return 0;
  }
  const std::string_view digits = message_id.substr(origin.size() + 1);
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return ec == std::errc{} && end == digits.data() + digits.size() ? value : 0;
}

DecodeStatus decode(std::string_view body, state_pb::ReplicationRecord* record) {
  if (!record->ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return DecodeStatus::kUnparsable;
  }
  if (record->format_version() != kRecordFormatVersion) return DecodeStatus::kUnknownVersion;
  if (record->change_case() == state_pb::ReplicationRecord::CHANGE_NOT_SET) {
    return DecodeStatus::kEmpty;
  }
  return DecodeStatus::kOk;
}

std::string batch_id(std::string_view origin, std::uint64_t first, std::uint64_t last,
                     std::uint64_t epoch) {
  std::string id = message_id(origin, first) + "-" + std::to_string(last);
  if (epoch > 0) {
    id.push_back('~');  // (not += "~" + …: gcc 12's -Wrestrict false positive)
    id.append(std::to_string(epoch));
  }
  return id;
}

bool batch_range(std::string_view message_id, std::string_view origin, std::uint64_t* first,
                 std::uint64_t* last) {
  if (message_id.size() <= origin.size() + 1 || !message_id.starts_with(origin) ||
      message_id[origin.size()] != ':') {
    return false;
  }
  const std::string_view range = message_id.substr(origin.size() + 1);
  const char* end = range.data() + range.size();
  const auto a = std::from_chars(range.data(), end, *first);
  if (a.ec != std::errc{} || a.ptr == end || *a.ptr != '-') return false;
  const auto b = std::from_chars(a.ptr + 1, end, *last);
  if (b.ec != std::errc{} || *first > *last) return false;
  if (b.ptr == end) return true;
  std::uint64_t epoch = 0;
  if (*b.ptr != '~') return false;
  const auto c = std::from_chars(b.ptr + 1, end, epoch);
  return c.ec == std::errc{} && c.ptr == end && epoch > 0;
}

// Field 1 (format_version, varint) = 2.
std::string batch_header() { return std::string("\x08\x02", 2); }

// Field 2 (records, length-delimited): tag 0x12, length, bytes.
void append_to_batch(std::string* batch, std::string_view record) {
  batch->push_back('\x12');
  put_varint(batch, record.size());
  batch->append(record);
}

bool decode_message(std::string_view body, std::vector<state_pb::ReplicationRecord>* records,
                    std::uint64_t* skipped) {
  records->clear();
  state_pb::ReplicationBatch batch;
  if (batch.ParseFromArray(body.data(), static_cast<int>(body.size())) &&
      batch.format_version() == kBatchFormatVersion) {
    for (state_pb::ReplicationRecord& r : *batch.mutable_records()) {
      const bool ok = r.format_version() == kRecordFormatVersion &&
                      r.change_case() != state_pb::ReplicationRecord::CHANGE_NOT_SET;
      if (ok)
        records->push_back(std::move(r));
      else
        ++*skipped;
    }
    return true;
  }
  state_pb::ReplicationRecord single;
  if (decode(body, &single) != DecodeStatus::kOk) return false;
  records->push_back(std::move(single));
  return true;
}

}  // namespace ic::replication

namespace ic::replication {
namespace {

// A protobuf wire-format reader over one message's bytes (top-level fields
// only; https://protobuf.dev/programming-guides/encoding/).
class WireReader {
 public:
  explicit WireReader(std::string_view bytes) : at_(bytes.data()), end_(at_ + bytes.size()) {}
  bool done() const { return at_ == end_; }
  bool varint(std::uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64 && at_ < end_; shift += 7) {
      const auto byte = static_cast<std::uint8_t>(*at_++);
      *v |= std::uint64_t{byte & 0x7Fu} << shift;
      if (byte < 0x80) return true;
    }
    return false;
  }
  // The next field: its number, and its value (varint) or bytes
  // (length-delimited); fixed-width fields are passed over.
  bool field(int* number, std::uint64_t* value, std::string_view* bytes) {
    std::uint64_t tag = 0;
    if (!varint(&tag)) return false;
    *number = static_cast<int>(tag >> 3);
    switch (tag & 7) {
      case 0:
        return varint(value);
      case 1:
        return skip(8);
      case 5:
        return skip(4);
      case 2: {
        std::uint64_t n = 0;
        if (!varint(&n) || n > static_cast<std::uint64_t>(end_ - at_)) return false;
        *bytes = std::string_view(at_, n);
        at_ += n;
        return true;
      }
      default:
        return false;
    }
  }

 private:
  bool skip(std::ptrdiff_t n) {
    if (end_ - at_ < n) return false;
    at_ += n;
    return true;
  }
  const char* at_;
  const char* end_;
};

// The length-delimited field `number` of `message` (the last one, as a
// parser keeps); false when the message is malformed.
bool string_field(std::string_view message, int number, std::string_view* out) {
  WireReader r(message);
  while (!r.done()) {
    int n = 0;
    std::uint64_t value = 0;
    std::string_view bytes;
    if (!r.field(&n, &value, &bytes)) return false;
    if (n == number) *out = bytes;
  }
  return true;
}

// One record of a batch: `origin`'s update or event unparsed, else parsed
// as decode() does. False: not applied (counted as skipped).
bool read_record(std::string_view bytes, std::string_view origin, std::vector<Received>* out) {
  WireReader r(bytes);
  std::uint64_t version = 0, sequence = 0;
  std::string_view from, change;
  int change_field = 0;
  while (!r.done()) {
    int n = 0;
    std::uint64_t value = 0;
    std::string_view field;
    if (!r.field(&n, &value, &field)) return false;
    if (n == 1) version = value;
    if (n == 2) from = field;
    if (n == 3) sequence = value;
    if (n >= 5 && n <= 7) {
      change_field = n;
      change = field;
    }
  }
  const bool update = change_field == state_pb::ReplicationRecord::kUpdateFieldNumber;
  const bool event = change_field == state_pb::ReplicationRecord::kEventFieldNumber;
  const int tenant_field = update ? int{pb::CacheStateUpdate::kTenantIdFieldNumber}
                                  : int{pb::CacheEvent::kTenantIdFieldNumber};
  std::string_view tenant;
  if (version == kRecordFormatVersion && from == origin && (update || event) &&
      string_field(change, tenant_field, &tenant)) {
    out->emplace_back(OwnChange{sequence, event, std::string(tenant), std::string(change)});
    return true;
  }
  state_pb::ReplicationRecord record;
  if (decode(bytes, &record) != DecodeStatus::kOk) return false;
  out->emplace_back(std::move(record));
  return true;
}

}  // namespace

bool decode_received(std::string_view body, std::string_view origin, std::vector<Received>* records,
                     std::uint64_t* skipped) {
  records->clear();
  // A batch: field 1 = kBatchFormatVersion, then the records (field 2).
  WireReader r(body);
  std::uint64_t version = 0;
  std::vector<std::string_view> parts;
  bool batch = true;
  while (batch && !r.done()) {
    int n = 0;
    std::uint64_t value = 0;
    std::string_view bytes;
    batch = r.field(&n, &value, &bytes);
    if (n == 1) version = value;
    if (n == 2) parts.push_back(bytes);
  }
  if (!batch || version != kBatchFormatVersion) {
    // A single record (format 1), or garbage: the parsing decoder decides.
    std::vector<state_pb::ReplicationRecord> parsed;
    if (!decode_message(body, &parsed, skipped)) return false;
    for (auto& p : parsed) records->emplace_back(std::move(p));
    return true;
  }
  for (std::string_view part : parts) {
    if (!read_record(part, origin, records)) ++*skipped;
  }
  return true;
}

}  // namespace ic::replication
