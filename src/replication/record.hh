#pragma once
// The replication stream's records (docs/replication.md "Record format"): one
// JetStream message body = one serialized state.v1.ReplicationRecord. The
// Nats-Msg-Id header is "<origin>:<origin_sequence>", so JetStream stores a
// record republished after a lost ack only once (its duplicate window).

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "inferencecache/state/v1/state.pb.h"

namespace ic::replication {

namespace state_pb = ::inferencecache::state::v1;
namespace pb = ::inferencecache::v1alpha1;

// ReplicationRecord.format_version this build writes and applies.
inline constexpr std::uint32_t kRecordFormatVersion = 1;

// Builds the records of one server. Thread-safe: every reactor encodes the
// changes it accepts; origin_sequence is one atomic counter.
class RecordEncoder {
 public:
  // `origin`: unique per server process (host, pid and start time), so a
  // restarted server's sequence 1 is never taken for a duplicate.
  explicit RecordEncoder(std::string origin);
  const std::string& origin() const { return origin_; }

  // Serialized records; `*sequence` receives the record's origin_sequence.
  std::string encode(const pb::CacheStateUpdate& update, std::int64_t now_wall_us,
                     std::uint64_t* sequence);
  std::string encode(const pb::CacheEvent& event, std::int64_t now_wall_us,
                     std::uint64_t* sequence);
  std::string encode_policy(std::string_view policy_json, std::int64_t now_wall_us,
                            std::uint64_t* sequence);
  std::string encode_templates(std::string_view templates_json, std::int64_t now_wall_us,
                               std::uint64_t* sequence);

 private:
  state_pb::ReplicationRecord start(std::int64_t now_wall_us, std::uint64_t* sequence);
  std::string with_change(int field, const google::protobuf::MessageLite& change,
                          std::int64_t now_wall_us, std::uint64_t* sequence);
  std::string origin_;
  std::string head_;  // fields 1-2 (format_version, origin) serialized: the same in every record
  std::atomic<std::uint64_t> next_{1};
};

// ReplicationBatch.format_version: a stream message holding several records.
inline constexpr std::uint32_t kBatchFormatVersion = 2;

// The Nats-Msg-Id of a record: "<origin>:<sequence>".
std::string message_id(std::string_view origin, std::uint64_t sequence);
// The sequence part of a message id of `origin`'s; 0 when it is not one.
std::uint64_t sequence_of(std::string_view message_id, std::string_view origin);

// The Nats-Msg-Id of a batch of consecutive records: "<origin>:<first>-<last>"
// (the same range always holds the same records, so JetStream's duplicate
// window drops a republished batch; a different range is a different message).
// `epoch` > 0 appends "~<epoch>": the ids after a squatted one (an id someone
// else published first, docs/replication.md "Message ids").
std::string batch_id(std::string_view origin, std::uint64_t first, std::uint64_t last,
                     std::uint64_t epoch = 0);
// The range of a batch id of `origin`'s (any epoch); false when it is not one.
bool batch_range(std::string_view message_id, std::string_view origin, std::uint64_t* first,
                 std::uint64_t* last);

// Appends one serialized record to a ReplicationBatch body being built (start
// with batch_header()): the bytes a serialized ReplicationBatch has, without
// parsing or re-serializing the record.
std::string batch_header();
void append_to_batch(std::string* batch, std::string_view record);

// Parses one stream message body: a ReplicationBatch, or a single record of
// format 1. Records that decode() refuses are left out and counted in
// *skipped; false (nothing) when the body is neither.
bool decode_message(std::string_view body, std::vector<state_pb::ReplicationRecord>* records,
                    std::uint64_t* skipped);

// This server's own record of an update or event, left unparsed (its echo:
// docs/replication.md "Applying the stream"). Most echoes are skipped, so
// the change is parsed only when its owner core applies it again.
struct OwnChange {
  std::uint64_t sequence = 0;  // origin_sequence
  bool event = false;          // a CacheEvent, else a CacheStateUpdate
  std::string tenant_id;
  std::string bytes;  // the serialized change
};

// One record of a stream message: another server's (or a policy) parsed,
// or one of `origin`'s updates and events unparsed.
using Received = std::variant<state_pb::ReplicationRecord, OwnChange>;

// decode_message() that leaves `origin`'s updates and events unparsed:
// the same records in the same order, the same refusals and *skipped count.
bool decode_received(std::string_view body, std::string_view origin, std::vector<Received>* records,
                     std::uint64_t* skipped);

enum class DecodeStatus : std::uint8_t {
  kOk,
  kUnparsable,      // not a ReplicationRecord
  kUnknownVersion,  // a format_version this build does not apply (a newer writer)
  kEmpty,           // no change set
};

// Parses one message body. Anything but kOk is skipped and counted.
DecodeStatus decode(std::string_view body, state_pb::ReplicationRecord* record);

}  // namespace ic::replication
