// The pick's bookings and the response side's feedback (gateway/picker.hh,
// docs/gateway.md "Feedback", "Shedding"): only what is answered is booked,
// the shedding bound answers kShed and books nothing, feedback reaches the
// tenant's owner core. A two-core index in one thread (the stream on core 0,
// the tenant owned by core 1); exact work rows. The prefill rate before one is
// learned is the default 10,000 tokens/s (16 tokens = 1.6 ms); a replica
// holds a prompt from the policy's 64 matched tokens on.

#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "../service/two_core_index.hh"
#include "fingerprint/fingerprint.hh"
#include "gateway/endpoints.hh"
#include "gateway/picker.hh"
#include "index/partition.hh"
#include "sharding/index_wire.hh"

namespace {

namespace pb = ::inferencecache::v1alpha1;
using ic::gateway::Pick;
using ic::gateway::PickReason;
using ic::gateway::PickRequest;
using Kind = ic::index::BookingFeedback::Kind;

const std::string kA = "10.0.0.1:8000";
const std::string kB = "10.0.0.2:8000";
const std::string kC = "10.0.0.3:8000";

std::string tenant_on(unsigned core) {
  for (int i = 0;; ++i) {
    std::string t = "tenant-" + std::to_string(i);
    if (ic::index::owner_core(t, 2) == core) return t;
  }
}

std::vector<std::uint32_t> ids(std::uint32_t first, std::size_t n) {
  std::vector<std::uint32_t> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back(first + static_cast<std::uint32_t>(i));
  return v;
}
std::vector<std::uint32_t> operator+(std::vector<std::uint32_t> a,
                                     const std::vector<std::uint32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Picker : ic::test::TwoCoreIndex {
  const std::string tenant = tenant_on(1);
  ic::index::Shard& owner = shard1;

  // `replica` reports the blocks of `tokens` (16 per block) and idle stats
  // for (`as`, `model`), on the tenant's owner shard.
  void report(const std::string& replica, const std::vector<std::uint32_t>& tokens,
              const std::string& as = {}, const std::string& model = "m") {
    const std::string& who = as.empty() ? tenant : as;
    pb::CacheStateUpdate u;
    u.set_tenant_id(who);
    u.set_model_id(model);
    u.set_hash_scheme("vllm");
    u.set_replica_id(replica);
    u.set_timestamp_us(clock.wall);
    u.mutable_stats()->set_pressure(0.0f);
    auto* p = u.add_prefixes();
    for (const std::uint64_t h : ic::fingerprint::prefix_hashes(tokens, 16)) {
      const auto wire = ic::fingerprint::to_wire(h);
      p->add_block_hashes(std::string(reinterpret_cast<const char*>(wire.data()), wire.size()));
      p->add_block_token_counts(16);
    }
    ic::sharding::wire::ingest(ic::index::owner_core(who, 2) == 1 ? shard1 : shard0, u, clock.wall);
  }

  Pick pick(const std::vector<std::uint32_t>& tokens,
            std::optional<std::vector<std::string>> subset = std::nullopt,
            std::int64_t shed_queue_us = 0) {
    return pick_as(tenant, "m", tokens, std::move(subset), shed_queue_us);
  }

  // A pick for (`tenant_id`, `model`) from core 0, the fixture's tenant the pool tenant.
  Pick pick_as(const std::string& tenant_id, const std::string& model,
               const std::vector<std::uint32_t>& tokens,
               std::optional<std::vector<std::string>> subset = std::nullopt,
               std::int64_t shed_queue_us = 0) {
    PickRequest r;
    r.tenant_id = tenant_id;
    r.pool_tenant = tenant;
    r.model_id = model;
    r.hash_scheme = "vllm";
    r.token_ids = tokens;
    r.subset = std::move(subset);
    r.shed_queue_us = shed_queue_us;
    Pick out;
    link.current = 0;
    ic::gateway::pick(index, std::move(r), 4, [&out](Pick&& p) { out = std::move(p); });
    link.run();
    return out;
  }

  void tell(Kind kind, ic::index::BookingRef booking, std::string replica = {},
            std::int64_t held = 0) {
    link.current = 0;
    ic::gateway::feedback(index, tenant, kind, booking, std::move(replica), held);
    CHECK(link.queued(1) == 1);  // one way, to the owner
    link.run();
  }

  // "open_bookings/booked_tokens/expired" of `replica`'s work row ("-" for none).
  std::string work(const std::string& replica) {
    for (const ic::index::WorkRow& w : owner.collect_snapshot().work) {
      if (w.replica_id == replica)
        return std::to_string(w.open_bookings) + "/" + std::to_string(w.booked_tokens) + "/" +
               std::to_string(w.bookings_expired);
    }
    return "-";
  }
};

// The prompt: 256 tokens (16 blocks); A holds its first 128, B its first 64.
const std::vector<std::uint32_t> kPrompt = ids(1, 256);

}  // namespace

TEST_CASE_FIXTURE(Picker,
                  "the answer's first endpoint is booked; the excluded top replica is not") {
  report(kA, ids(1, 128));
  report(kB, ids(1, 64));
  // No hint: A (128 uncached, 12.8 ms) before B (192, 19.2 ms); A is booked.
  Pick p = pick(kPrompt);
  CHECK(p.endpoints == std::vector<std::string>{kA, kB});
  CHECK(p.held_tokens == std::vector<std::int64_t>{128, 64});
  CHECK(p.reason == PickReason::kPrefixMatch);
  CHECK(p.booking.valid());
  CHECK(work(kA) == "1/128/0");
  CHECK(work(kB) == "-");
}

TEST_CASE_FIXTURE(Picker, "a subset hint without the top replica moves its booking to the answer") {
  report(kA, ids(1, 128));
  report(kB, ids(1, 64));
  Pick p = pick(kPrompt, std::vector<std::string>{kB});
  CHECK(p.endpoints == std::vector<std::string>{kB});
  CHECK(p.held_tokens == std::vector<std::int64_t>{64});
  CHECK(p.reason == PickReason::kPrefixMatch);
  CHECK(p.booking.valid());
  // The lookup booked A; the answer is B, holding 64 of the 256 tokens.
  CHECK(work(kA) == "0/0/0");
  CHECK(work(kB) == "1/192/0");
}

TEST_CASE_FIXTURE(Picker, "no ranked endpoint eligible: a pick by load, and nothing stays booked") {
  report(kA, ids(1, 128));
  report(kB, ids(1, 64));
  Pick p = pick(kPrompt, std::vector<std::string>{kC});
  CHECK(p.endpoints == std::vector<std::string>{kC});
  CHECK(p.held_tokens == std::vector<std::int64_t>{0});
  CHECK(p.reason == PickReason::kLoad);
  CHECK_FALSE(p.booking.valid());
  CHECK(work(kA) == "0/0/1");  // the lookup's booking, ended at once
  CHECK(work(kC) == "-");
}

TEST_CASE_FIXTURE(Picker,
                  "shedding: every eligible endpoint over the queue bound → kShed, unbooked") {
  report(kA, ids(1, 128));
  report(kB, ids(1, 64));
  // A: 128 tokens queued (12.8 ms).
  CHECK(pick(kPrompt).endpoints.front() == kA);
  // A prompt sharing A's 128 tokens, then new ones: A waits 12.8 + 12.8 ms,
  // B 19.2 ms (costs at the default weight 0.8: 23.04 and 15.36 ms); B is
  // booked 192 tokens (19.2 ms).
  CHECK(pick(ids(1, 128) + ids(1000, 128)).endpoints.front() == kB);
  CHECK(work(kA) == "1/128/0");
  CHECK(work(kB) == "1/192/0");
  // Bound 10 ms: both are over it. The lookup booked A (12.8 + 19.2 ms before
  // B's 19.2 + 19.2 ms; costs 28.16 and 34.56 ms), and that booking ends at once.
  const auto other = ids(1, 64) + ids(2000, 192);
  Pick p = pick(other, std::nullopt, 10'000);
  CHECK(p.reason == PickReason::kShed);
  CHECK(p.endpoints.empty());
  CHECK_FALSE(p.booking.valid());
  CHECK(work(kA) == "1/128/1");
  CHECK(work(kB) == "1/192/0");
  // An endpoint of the subset with no queue at all is under the bound.
  p = pick(other, std::vector<std::string>{kC}, 10'000);
  CHECK(p.reason == PickReason::kLoad);
  CHECK(p.endpoints == std::vector<std::string>{kC});
  CHECK(work(kA) == "1/128/2");
  // 2.8 ms later A's queue is 10 ms: at the bound, not over it.
  clock.wall += 2'800;
  p = pick(other, std::nullopt, 10'000);
  CHECK(p.reason != PickReason::kShed);
  CHECK_FALSE(p.endpoints.empty());
}

TEST_CASE_FIXTURE(Picker, "feedback reaches the owner: served elsewhere, first byte, end") {
  report(kA, ids(1, 128));
  report(kB, ids(1, 64));
  const Pick p = pick(kPrompt);
  REQUIRE(p.endpoints.front() == kA);
  // The gateway's retry went to B (holding 64 tokens): 192 booked there.
  tell(Kind::kServedBy, p.booking, kB, 64);
  CHECK(work(kA) == "0/0/0");
  CHECK(work(kB) == "1/192/0");
  // The first byte 24 ms later: B's prefill of 192 tokens is done (8,000 tokens/s).
  clock.wall += 24'000;
  tell(Kind::kFirstByte, p.booking);
  CHECK(work(kB) == "1/0/0");
  for (const ic::index::WorkRow& w : owner.collect_snapshot().work) {
    if (w.replica_id == kB) CHECK(w.prefill_tokens_per_s == doctest::Approx(8000.0));
  }
  // The end leaves the booked blocks as speculative entries: the same prompt
  // is held whole on B now.
  tell(Kind::kEnded, p.booking);
  CHECK(work(kB) == "1/0/0");
  const Pick again = pick(kPrompt);
  CHECK(again.endpoints.front() == kB);
  CHECK(again.held_tokens.front() == 256);
  CHECK_FALSE(again.booking.valid());  // nothing uncached: nothing booked
}

TEST_CASE_FIXTURE(Picker, "feedback without a booking sends nothing") {
  link.current = 0;
  ic::gateway::feedback(index, tenant, Kind::kEnded, ic::index::BookingRef{});
  CHECK(link.queued(1) == 0);
}

TEST_CASE_FIXTURE(Picker, "a tenant without reports picks among the pool tenant's endpoints") {
  // The newcomer's owner is core 0, the pool tenant's core 1: a second hop.
  const std::string newcomer = tenant_on(0);
  CHECK(pick_as(newcomer, "m", kPrompt).reason == PickReason::kNoEndpoint);
  report(kB, ids(1, 64));
  report(kA, ids(1, 128));
  // Another tenant's reports are not the pool's: they never reach the newcomer.
  report(kC, ids(1, 256), "tenant-x");
  Pick p = pick_as(newcomer, "m", kPrompt);
  // By load, all idle: the pool's endpoints in the order they first reported; nothing booked.
  CHECK(p.endpoints == std::vector<std::string>{kB, kA});
  CHECK(p.held_tokens == std::vector<std::int64_t>{0, 0});
  CHECK(p.reason == PickReason::kLoad);
  CHECK(p.reason_code == "UNKNOWN_TENANT");
  CHECK_FALSE(p.booking.valid());
  CHECK(work(kA) == "-");
  CHECK(work(kB) == "-");
  // The subset hint still bounds the choice, without a second hop.
  CHECK(pick_as(newcomer, "m", kPrompt, std::vector<std::string>{kC}).endpoints ==
        std::vector<std::string>{kC});
  // A model the pool never reported: nothing to pick.
  CHECK(pick_as(newcomer, "other", kPrompt).reason == PickReason::kNoEndpoint);
  // No model named (a body that did not parse): the pool's endpoints of every
  // model, for the pool tenant itself too.
  report(kC, ids(1, 16), tenant, "m2");
  report(kA, ids(1, 16), tenant, "m2");  // each endpoint once
  for (const std::string& who : {newcomer, tenant}) {
    p = pick_as(who, "", {});
    CHECK(p.endpoints == std::vector<std::string>{kB, kA, kC});
    CHECK(p.reason == PickReason::kLoad);
  }
  // The pool tenant's own picks are its lookups, as before.
  p = pick(kPrompt);
  CHECK(p.endpoints == std::vector<std::string>{kA, kB});
  CHECK(p.held_tokens == std::vector<std::int64_t>{128, 64});
}

TEST_CASE_FIXTURE(Picker,
                  "replica ids that are not endpoints do not crowd the pool's endpoints out") {
  // 1,100 ids first (more than the 1,024 candidates a pick orders), then A.
  for (int i = 0; i < 1100; ++i) report("pod-" + std::to_string(i), {});
  report(kA, ids(1, 16));
  CHECK(pick_as(tenant_on(0), "m", kPrompt).endpoints == std::vector<std::string>{kA});
  CHECK(pick_as(tenant, "m", {}).endpoints == std::vector<std::string>{kA});
}

TEST_CASE_FIXTURE(Picker,
                  "shedding bounds a pick among the pool's endpoints by the pool's queues") {
  report(kA, ids(1, 128));
  // The pool tenant's own pick books A 128 tokens (12.8 ms).
  CHECK(pick(kPrompt).endpoints == std::vector<std::string>{kA});
  CHECK(work(kA) == "1/128/0");
  const std::string newcomer = tenant_on(0);
  Pick p = pick_as(newcomer, "m", kPrompt, std::nullopt, 10'000);
  CHECK(p.reason == PickReason::kShed);
  CHECK(p.endpoints.empty());
  p = pick_as(newcomer, "m", kPrompt, std::nullopt, 20'000);
  CHECK(p.reason == PickReason::kLoad);
  CHECK(p.endpoints == std::vector<std::string>{kA});
  CHECK(work(kA) == "1/128/0");  // a pick among the pool's endpoints books nothing
}

TEST_CASE_FIXTURE(Picker, "the pool's owner mailbox full: the first hop's answer stands") {
  report(kA, ids(1, 128));
  const std::string newcomer = tenant_on(0);
  link.capacity[1] = 0;
  const Pick p = pick_as(newcomer, "m", kPrompt);
  CHECK(p.reason == PickReason::kNoEndpoint);
  CHECK(link.queued(1) == 0);
  link.capacity[1] = 1u << 20;
  CHECK(pick_as(newcomer, "m", kPrompt).endpoints == std::vector<std::string>{kA});
}

TEST_CASE_FIXTURE(Picker, "picks by load: fewest in flight, then the list's order, once each") {
  ic::gateway::EndpointLoad& load = ic::gateway::EndpointLoad::local();
  load.started(kC, 1);
  const Pick p = pick(kPrompt, std::vector<std::string>{kC, kB, kC, kA, "not-an-endpoint"});
  load.ended(kC, 2);
  CHECK(p.endpoints == std::vector<std::string>{kB, kA, kC});
  CHECK(p.held_tokens == std::vector<std::int64_t>{0, 0, 0});
  CHECK(p.reason == PickReason::kLoad);
}
