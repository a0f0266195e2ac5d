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

// The record's fields 1-4, then `change` as length-delimited field `field`:
// the bytes SerializeAsString() gives with the change set, without copying
// the change into the record first (fields serialize in number order).
std::string with_change(const state_pb::ReplicationRecord& head, int field,
                        const google::protobuf::MessageLite& change) {
  std::string out = head.SerializeAsString();
  out.push_back(static_cast<char>(field << 3 | 2));
  put_varint(&out, change.ByteSizeLong());
  change.AppendToString(&out);
  return out;
}

}  // namespace

std::string RecordEncoder::encode(const pb::CacheStateUpdate& update, std::int64_t now_wall_us,
                                  std::uint64_t* sequence) {
  return with_change(start(now_wall_us, sequence), state_pb::ReplicationRecord::kUpdateFieldNumber,
                     update);
}

std::string RecordEncoder::encode(const pb::CacheEvent& event, std::int64_t now_wall_us,
                                  std::uint64_t* sequence) {
  return with_change(start(now_wall_us, sequence), state_pb::ReplicationRecord::kEventFieldNumber,
                     event);
}

std::string RecordEncoder::encode_policy(std::string_view policy_json, std::int64_t now_wall_us,
                                         std::uint64_t* sequence) {
  state_pb::ReplicationRecord record = start(now_wall_us, sequence);
  record.set_policy_json(std::string(policy_json));
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

std::string batch_id(std::string_view origin, std::uint64_t first, std::uint64_t last) {
  return message_id(origin, first) + "-" + std::to_string(last);
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
  return b.ec == std::errc{} && b.ptr == end && *first <= *last;
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
