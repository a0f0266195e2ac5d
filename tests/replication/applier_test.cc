// Applier: stream order on each core when a core's records are run slice by
// slice over several reactor turns (docs/replication.md "Applying the stream").

#include "replication/applier.hh"

#include <doctest/doctest.h>

#include <atomic>
#include <string>

#include "../service/two_core_index.hh"

namespace {

using ic::replication::Applier;
namespace state_pb = ::inferencecache::state::v1;

state_pb::ReplicationRecord policy_record(const std::string& json) {
  state_pb::ReplicationRecord record;
  record.set_format_version(1);
  record.set_origin("other");
  record.set_policy_json(json);
  return record;
}

std::string one_policy(int timeout_ms) {
  return R"({"version":7,"policies":[{"namespace":"a","lookupTimeoutMs":)" +
         std::to_string(timeout_ms) + "}]}";
}

}  // namespace

TEST_CASE("a batch posted while an earlier one is part-run waits behind it on its core") {
  ic::test::TwoCoreIndex t;
  // A slice of 0 µs: each reactor turn runs one record per core.
  Applier applier(t.index, "me", 4096, 0);
  const std::atomic<bool> stopping{false};
  // Round 1: three policies (one each, every core); round 2, posted before
  // the cores ran anything: a policy set with none. Stream order ends with none.
  applier.add(1, policy_record(one_policy(3)));
  applier.add(2, policy_record(one_policy(4)));
  applier.add(3, policy_record(one_policy(5)));
  REQUIRE(applier.flush(stopping));
  applier.add(4, policy_record(R"({"version":7,"policies":[]})"));
  REQUIRE(applier.flush(stopping));
  CHECK(applier.applied_through() == 0);

  // One turn per pass: the mailbox's tasks first, then what the turn deferred.
  std::uint64_t seen = 0;
  int turns = 0;
  while (!applier.idle()) {
    REQUIRE(++turns <= 16);
    for (unsigned core = 0; core < 2; ++core) t.link.run_core(core);
    const std::uint64_t through = applier.applied_through();
    CHECK(through >= seen);  // never backwards
    seen = through;
  }
  // The first turn queues both rounds; the next three run round 1's records,
  // one each; the fifth runs round 2.
  CHECK(turns == 5);
  CHECK(applier.applied_through() == 4);
  CHECK(t.shard0.policies()->policy_count() == 0);
  CHECK(t.shard1.policies()->policy_count() == 0);
}
