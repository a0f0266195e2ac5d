// The replication record codec and the bounded outbox (src/replication):
// exact record fields, message ids, unknown versions skipped, own records
// left unparsed; the outbox's byte bound, sequence order, acks and retries.

#include <doctest/doctest.h>

#include <string>
#include <variant>
#include <vector>

#include "replication/outbox.hh"
#include "replication/record.hh"

namespace ic::replication {
namespace {

TEST_CASE("records carry origin, sequence, time and the change; sequences count from 1") {
  RecordEncoder encoder("host/7/99");
  pb::CacheStateUpdate update;
  update.set_tenant_id("team-a");
  update.set_timestamp_us(123);
  pb::CacheEvent event;
  event.set_type(pb::CacheEvent::ALL_CLEARED);
  std::uint64_t s1 = 0, s2 = 0, s3 = 0;
  const std::string r1 = encoder.encode(update, 1000, &s1);
  const std::string r2 = encoder.encode(event, 2000, &s2);
  const std::string r3 = encoder.encode_policy(R"({"version":1})", 3000, &s3);
  CHECK(s1 == 1);
  CHECK(s2 == 2);
  CHECK(s3 == 3);
  state_pb::ReplicationRecord got;
  REQUIRE(decode(r1, &got) == DecodeStatus::kOk);
  CHECK(got.format_version() == 1);
  CHECK(got.origin() == "host/7/99");
  CHECK(got.origin_sequence() == 1);
  CHECK(got.accepted_at_us() == 1000);
  CHECK(got.update().tenant_id() == "team-a");
  CHECK(got.update().timestamp_us() == 123);
  REQUIRE(decode(r2, &got) == DecodeStatus::kOk);
  CHECK(got.event().type() == pb::CacheEvent::ALL_CLEARED);
  CHECK(got.accepted_at_us() == 2000);
  REQUIRE(decode(r3, &got) == DecodeStatus::kOk);
  CHECK(got.policy_json() == R"({"version":1})");
}

TEST_CASE("a record of another format version, an empty one and garbage are not applied") {
  state_pb::ReplicationRecord newer;
  newer.set_format_version(2);
  newer.set_policy_json("{}");
  state_pb::ReplicationRecord got;
  CHECK(decode(newer.SerializeAsString(), &got) == DecodeStatus::kUnknownVersion);
  state_pb::ReplicationRecord empty;
  empty.set_format_version(1);
  CHECK(decode(empty.SerializeAsString(), &got) == DecodeStatus::kEmpty);
  CHECK(decode(std::string("\xff\xff\xff", 3), &got) == DecodeStatus::kUnparsable);
}

TEST_CASE("message ids are origin:sequence and parse back only for that origin") {
  CHECK(message_id("h/1/2", 42) == "h/1/2:42");
  CHECK(sequence_of("h/1/2:42", "h/1/2") == 42);
  CHECK(sequence_of("h/1/3:42", "h/1/2") == 0);
  CHECK(sequence_of("h/1/2:", "h/1/2") == 0);
  CHECK(sequence_of("h/1/2:4x", "h/1/2") == 0);
  CHECK(sequence_of("h/1/2", "h/1/2") == 0);
}

TEST_CASE("the outbox keeps sequence order, settles acks, requeues failures, bounds bytes") {
  Outbox box(10);
  CHECK(box.offer(2, "bbb"));
  CHECK(box.offer(1, "aaa"));
  CHECK(box.offer(3, "ccc"));
  CHECK_FALSE(box.offer(4, "dd"));  // 9 + 2 > 10: dropped
  CHECK(box.bytes() == 9);
  CHECK(box.records() == 3);
  auto taken = box.take(2);
  REQUIRE(taken.size() == 2);
  CHECK(taken[0].sequence == 1);
  CHECK(taken[0].body == "aaa");
  CHECK(taken[1].sequence == 2);
  CHECK(box.queued() == 1);
  CHECK(box.bytes() == 9);  // awaiting acks still count
  box.acked(1);
  box.acked(1);  // a duplicate ack changes nothing
  CHECK(box.bytes() == 6);
  box.failed(Outbox::Item{2, "bbb"});
  CHECK(box.queued() == 2);
  taken = box.take(10);
  REQUIRE(taken.size() == 2);
  CHECK(taken[0].sequence == 2);  // the retry goes first again
  CHECK(taken[1].sequence == 3);
  CHECK(box.offer(4, "dddd"));  // room again: 6 + 4 ≤ 10
  box.acked(2);
  box.acked(3);
  box.acked(4);  // not taken yet: nothing to settle
  CHECK(box.bytes() == 4);
  CHECK(box.records() == 1);
}

TEST_CASE(
    "batches: ids name the range, bodies are ReplicationBatch bytes, old records still read") {
  CHECK(batch_id("host/7/99", 5, 9) == "host/7/99:5-9");
  std::uint64_t first = 0, last = 0;
  CHECK(batch_range("host/7/99:5-9", "host/7/99", &first, &last));
  CHECK(first == 5);
  CHECK(last == 9);
  CHECK_FALSE(batch_range("host/7/99:5", "host/7/99", &first, &last));
  CHECK_FALSE(batch_range("host/7/99:9-5", "host/7/99", &first, &last));
  CHECK_FALSE(batch_range("other:5-9", "host/7/99", &first, &last));
  // After a squatted id: the same range under a new suffix, read back the same.
  CHECK(batch_id("host/7/99", 5, 9, 2) == "host/7/99:5-9~2");
  first = last = 0;
  CHECK(batch_range("host/7/99:6-8~2", "host/7/99", &first, &last));
  CHECK(first == 6);
  CHECK(last == 8);
  CHECK_FALSE(batch_range("host/7/99:6-8~", "host/7/99", &first, &last));
  CHECK_FALSE(batch_range("host/7/99:6-8~0", "host/7/99", &first, &last));
  CHECK_FALSE(batch_range("host/7/99:6-8x2", "host/7/99", &first, &last));

  RecordEncoder encoder("host/7/99");
  pb::CacheStateUpdate update;
  update.set_tenant_id("team-a");
  std::uint64_t s1 = 0, s2 = 0;
  const std::string r1 = encoder.encode(update, 1000, &s1);
  const std::string r2 = encoder.encode_policy(R"({"version":1})", 2000, &s2);
  std::string body = batch_header();
  append_to_batch(&body, r1);
  append_to_batch(&body, r2);
  state_pb::ReplicationBatch want;
  want.set_format_version(kBatchFormatVersion);
  REQUIRE(want.add_records()->ParseFromString(r1));
  REQUIRE(want.add_records()->ParseFromString(r2));
  CHECK(body == want.SerializeAsString());  // byte for byte

  std::vector<state_pb::ReplicationRecord> got;
  std::uint64_t skipped = 0;
  REQUIRE(decode_message(body, &got, &skipped));
  REQUIRE(got.size() == 2);
  CHECK(got[0].update().tenant_id() == "team-a");
  CHECK(got[1].policy_json() == R"({"version":1})");
  CHECK(skipped == 0);

  // A format-1 body (one record) still decodes; a record of an unknown
  // version inside a batch is left out and counted; garbage is refused.
  REQUIRE(decode_message(r1, &got, &skipped));
  CHECK(got.size() == 1);
  state_pb::ReplicationRecord future;
  future.set_format_version(9);
  future.set_policy_json("{}");
  append_to_batch(&body, future.SerializeAsString());
  REQUIRE(decode_message(body, &got, &skipped));
  CHECK(got.size() == 2);
  CHECK(skipped == 1);
  CHECK_FALSE(decode_message("\xff\xff\xff", &got, &skipped));
}

TEST_CASE("a batch ack settles exactly its range") {
  Outbox box(1 << 20);
  for (std::uint64_t s = 1; s <= 5; ++s) REQUIRE(box.offer(s, std::string(10, 'x')));
  CHECK(box.take(5).size() == 5);
  CHECK(box.acked(2, 4) == 3);
  CHECK(box.records() == 2);
  CHECK(box.bytes() == 20);
  CHECK(box.acked(2, 4) == 0);  // a duplicate ack
  CHECK(box.acked(1, 5) == 2);
  CHECK(box.records() == 0);
  CHECK(box.bytes() == 0);
}

// An update of tenant team-a with one block, an ALL_CLEARED of team-b.
pb::CacheStateUpdate sample_update() {
  pb::CacheStateUpdate update;
  update.set_tenant_id("team-a");
  update.set_timestamp_us(123);
  update.add_prefixes()->add_block_hashes(std::string(8, 'h'));
  return update;
}

pb::CacheEvent sample_event() {
  pb::CacheEvent event;
  event.set_type(pb::CacheEvent::ALL_CLEARED);
  event.set_tenant_id("team-b");
  return event;
}

TEST_CASE("an encoded record has exactly the bytes of the record with its change set") {
  RecordEncoder encoder("host/7/99");
  const pb::CacheStateUpdate update = sample_update();
  const pb::CacheEvent event = sample_event();
  std::uint64_t s1 = 0, s2 = 0;
  const std::string got_update = encoder.encode(update, 1000, &s1);
  const std::string got_event = encoder.encode(event, 2000, &s2);
  state_pb::ReplicationRecord want;
  want.set_format_version(kRecordFormatVersion);
  want.set_origin("host/7/99");
  want.set_origin_sequence(1);
  want.set_accepted_at_us(1000);
  *want.mutable_update() = update;
  CHECK(got_update == want.SerializeAsString());
  want.set_origin_sequence(2);
  want.set_accepted_at_us(2000);
  *want.mutable_event() = event;
  CHECK(got_event == want.SerializeAsString());
  // A zero time is left out, as the message's own serialization does.
  std::uint64_t s3 = 0;
  const std::string got_zero = encoder.encode(update, 0, &s3);
  want.set_origin_sequence(3);
  want.set_accepted_at_us(0);
  *want.mutable_update() = update;
  CHECK(got_zero == want.SerializeAsString());
}

TEST_CASE("decode_received: own updates and events unparsed, the rest parsed, in order") {
  RecordEncoder mine("host/7/99"), other("host/8/5");
  const pb::CacheStateUpdate update = sample_update();
  const pb::CacheEvent event = sample_event();
  std::uint64_t s = 0;
  std::string body = batch_header();
  append_to_batch(&body, mine.encode(update, 1000, &s));                     // 1
  append_to_batch(&body, other.encode(update, 1000, &s));                    // 1 of another origin
  append_to_batch(&body, mine.encode(event, 2000, &s));                      // 2
  append_to_batch(&body, mine.encode_policy(R"({"version":1})", 3000, &s));  // 3
  state_pb::ReplicationRecord future;
  future.set_format_version(9);
  future.set_origin("host/7/99");
  append_to_batch(&body, future.SerializeAsString());
  append_to_batch(&body, "\xff\xff");  // not a record

  std::vector<Received> got;
  std::uint64_t skipped = 0;
  REQUIRE(decode_received(body, "host/7/99", &got, &skipped));
  CHECK(skipped == 2);
  REQUIRE(got.size() == 4);
  const auto* own_update = std::get_if<OwnChange>(&got[0]);
  REQUIRE(own_update != nullptr);
  CHECK(own_update->sequence == 1);
  CHECK_FALSE(own_update->event);
  CHECK(own_update->tenant_id == "team-a");
  CHECK(own_update->bytes == update.SerializeAsString());  // byte for byte
  const auto* foreign = std::get_if<state_pb::ReplicationRecord>(&got[1]);
  REQUIRE(foreign != nullptr);
  CHECK(foreign->origin() == "host/8/5");
  CHECK(foreign->update().SerializeAsString() == update.SerializeAsString());
  const auto* own_event = std::get_if<OwnChange>(&got[2]);
  REQUIRE(own_event != nullptr);
  CHECK(own_event->sequence == 2);
  CHECK(own_event->event);
  CHECK(own_event->tenant_id == "team-b");
  CHECK(own_event->bytes == event.SerializeAsString());
  const auto* policy = std::get_if<state_pb::ReplicationRecord>(&got[3]);
  REQUIRE(policy != nullptr);
  CHECK(policy->policy_json() == R"({"version":1})");

  // A single record (format 1) is parsed whoever wrote it; garbage is refused.
  skipped = 0;
  REQUIRE(decode_received(mine.encode(update, 4000, &s), "host/7/99", &got, &skipped));
  REQUIRE(got.size() == 1);
  CHECK(std::get<state_pb::ReplicationRecord>(got[0]).origin_sequence() == 4);
  CHECK_FALSE(decode_received("\xff\xff\xff", "host/7/99", &got, &skipped));
  CHECK(skipped == 0);
}

}  // namespace
}  // namespace ic::replication
