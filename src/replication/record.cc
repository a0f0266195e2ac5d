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

std::string RecordEncoder::encode(const pb::CacheStateUpdate& update, std::int64_t now_wall_us,
                                  std::uint64_t* sequence) {
  state_pb::ReplicationRecord record = start(now_wall_us, sequence);
  *record.mutable_update() = update;
  return record.SerializeAsString();
}

std::string RecordEncoder::encode(const pb::CacheEvent& event, std::int64_t now_wall_us,
                                  std::uint64_t* sequence) {
  state_pb::ReplicationRecord record = start(now_wall_us, sequence);
  *record.mutable_event() = event;
  return record.SerializeAsString();
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

}  // namespace ic::replication
