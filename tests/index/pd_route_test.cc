// LookupPDRoute (docs/pd-routing.md): every reason code with an exact
// answer, the prefill leg priced by the work-aware wait (bookings move the
// next request), the decode leg by slots and affinity, decode slots freed by
// events and by time. Issue 30 acceptance 1. The prefill rate is the flag's
// default, 10,000 tokens/s (a 512-token block is 51.2 ms of work).

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "helpers.hh"
#include "sharding/pd_wire.hh"

using namespace ic::index;
using namespace ic::index::test;

namespace {

constexpr std::int32_t kBlock = 512;

// Two prefill replicas (p0 on h0/r0/z0, p1 on h1/r1/z0) and three decode
// replicas of two slots (d0 beside p0, d1 in p1's rack, d2 in another zone);
// "one": p0 and d0 with one slot held 1 s; "nopf": no prefill pool; "bal":
// p0, d0 on its host and d2 in another zone, 16 slots each; "zoned":
// a decode replica only in zone z1, and z1's one prefill replica; "uneven":
// p0, da of 1 slot on its host, db of 16 elsewhere; "zone1": p0 and d0 of
// 1 slot in zone z0, d3 of 1 slot in z1; "zone2": the same with p1 in z1.
constexpr const char* kTopologies = R"({"version":7,
  "policies":[{"namespace":"strict","strategy":{"requireChain":true}}],
  "pdTopologies":[
  {"name":"pd","transport":"NIXL",
   "prefill":[{"replica":"p0","host":"h0","rack":"r0","zone":"z0"},
              {"replica":"p1","host":"h1","rack":"r1","zone":"z0"}],
   "decode":[{"replica":"d0","host":"h0","rack":"r0","zone":"z0","slots":2},
             {"replica":"d1","host":"h2","rack":"r1","zone":"z0","slots":2},
             {"replica":"d2","host":"h3","rack":"r3","zone":"z1","slots":2}],
   "disaggregation":{"minUncachedTokens":2048}},
  {"name":"one","transport":"Mooncake","decodeHoldMs":1000,
   "prefill":[{"replica":"p0"}],"decode":[{"replica":"d0","slots":1}]},
  {"name":"nopf","transport":"Direct","decode":[{"replica":"d0"}]},
  {"name":"wide","transport":"NIXL","prefill":[{"replica":"p0"}],
   "decode":[{"replica":"d1","slots":16}]},
  {"name":"bal","transport":"NIXL","affinityWeight":0.5,
   "prefill":[{"replica":"p0","host":"h0","rack":"r0","zone":"z0"}],
   "decode":[{"replica":"d0","host":"h0","rack":"r0","zone":"z0","slots":16},
             {"replica":"d2","host":"h3","rack":"r3","zone":"z1","slots":16}]},
  {"name":"zoned","transport":"Direct","requiredDomain":"zone",
   "prefill":[{"replica":"p0","zone":"z0"},{"replica":"p1","zone":"z1"}],
   "decode":[{"replica":"d2","zone":"z1"}]},
  {"name":"uneven","transport":"NIXL","affinityWeight":0.5,
   "prefill":[{"replica":"p0","host":"h0","rack":"r0","zone":"z0"}],
   "decode":[{"replica":"da","host":"h0","rack":"r0","zone":"z0","slots":1},
             {"replica":"db","host":"h9","rack":"r9","zone":"z9","slots":16}]},
  {"name":"zone1","transport":"Direct","requiredDomain":"zone",
   "prefill":[{"replica":"p0","zone":"z0"}],
   "decode":[{"replica":"d0","zone":"z0","slots":1},{"replica":"d3","zone":"z1","slots":1}]},
  {"name":"zone2","transport":"Direct","requiredDomain":"zone",
   "prefill":[{"replica":"p0","zone":"z0"},{"replica":"p1","zone":"z1"}],
   "decode":[{"replica":"d0","zone":"z0","slots":1},{"replica":"d3","zone":"z1","slots":1}]}]})";

Harness pd_harness() {
  Harness h({}, nullptr, ic::config::Ranking::kWorkAware);
  h.policy(kTopologies);
  // The scope (t, m, vllm) exists: a replica outside every pool holds a block.
  h.ingest(chain_update("t", "m", "vllm", "other", kNow, {9}, 0, "", kBlock));
  return h;
}

std::vector<std::uint64_t> blocks(std::uint64_t first, std::size_t n) {
  std::vector<std::uint64_t> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back(first + i);
  return v;
}

pb::LookupPDRouteRequest pd_req(const std::vector<std::uint64_t>& chain,
                                const std::string& ref = "pd", const std::string& tenant = "t") {
  pb::LookupPDRouteRequest r;
  r.set_tenant_id(tenant);
  r.set_model_id("m");
  r.set_hash_scheme("vllm");
  r.set_pd_topology_ref(ref);
  for (std::uint64_t b : chain) {
    r.add_block_hashes(hb(b));
    r.add_block_token_counts(kBlock);
  }
  return r;
}

pb::LookupPDRouteResponse pd(Harness& h, const pb::LookupPDRouteRequest& r,
                             std::int64_t deadline = INT64_MAX) {
  LookupContext ctx;
  ctx.clock = &h.clock;
  ctx.deadline_mono_us = deadline;
  pb::LookupPDRouteResponse out;
  ic::sharding::wire::lookup_pd_route(*h.shard, r, ctx, &out);
  return out;
}

// "REASON prefill decode transport", empty legs left out.
std::string pair(const pb::LookupPDRouteResponse& r) {
  std::string s = r.reason_code();
  for (const std::string* f :
       {&r.prefill_replica_id(), &r.decode_replica_id(), &r.transport_hint()}) {
    if (!f->empty()) s += " " + *f;
  }
  return s;
}

}  // namespace

TEST_CASE("pd: no topology named is the contract default, an unknown one UNKNOWN_TOPOLOGY") {
  Harness h = pd_harness();
  const auto none = pd(h, pd_req(blocks(100, 8), ""));
  CHECK(none.ShortDebugString() == R"(reason_code: "NO_HINT")");
  const auto unknown = pd(h, pd_req(blocks(100, 8), "nope"));
  CHECK(pair(unknown) == "UNKNOWN_TOPOLOGY");
  CHECK(unknown.decode_replica_id().empty());
  // The reserved tenant never touches the index.
  CHECK(pair(pd(h, pd_req(blocks(100, 8), "pd", "inferencecache.io/probe"))) == "NO_HINT");
}

TEST_CASE("pd: the fail-open answers are LookupRoute's") {
  Harness h = pd_harness();
  // TIMEOUT: the deadline has passed when the call starts.
  CHECK(pair(pd(h, pd_req(blocks(100, 8)), h.clock.mono - 1)) == "TIMEOUT");
  // POLICY_REQUIRES_CHAIN: tenant "strict" requires a chain; this is an exact request.
  pb::LookupPDRouteRequest exact = pd_req({}, "pd", "strict");
  exact.set_prefix_hash(hb(7));
  exact.set_prefix_token_count(4096);
  CHECK(pair(pd(h, exact)) == "POLICY_REQUIRES_CHAIN");
  // NO_HINT: block arrays of different lengths.
  pb::LookupPDRouteRequest bad = pd_req(blocks(100, 2));
  bad.add_block_token_counts(kBlock);
  CHECK(pair(pd(h, bad)) == "NO_HINT");
  // NO_HINT: only prompt_text reaching the shard (the service tokenizes it
  // before the hop, service/pd_methods.hh; untokenized, it fails open).
  pb::LookupPDRouteRequest text = pd_req({});
  text.set_prompt_text("hello");
  CHECK(pair(pd(h, text)) == "NO_HINT");
}

TEST_CASE("pd: a request without a prompt is NO_HINT and books nothing") {
  Harness h = pd_harness();
  // No block_hashes, prefix_hash, token_ids or prompt_text.
  CHECK(pd(h, pd_req({}, "one")).ShortDebugString() == R"(reason_code: "NO_HINT")");
  // An exact key of 0 tokens that nothing holds: no prompt either.
  pb::LookupPDRouteRequest empty_key = pd_req({}, "one");
  empty_key.set_prefix_hash(hb(7));
  CHECK(pd(h, empty_key).ShortDebugString() == R"(reason_code: "NO_HINT")");
  // d0's one slot and p0's queue are still free: an idle pair (score 0.5),
  // then d0 again with no slot free (this pair's): its decode waits for it.
  const auto first = pd(h, pd_req(blocks(100, 8), "one"));
  CHECK(pair(first) == "DISAGGREGATED p0 d0 Mooncake");
  CHECK(first.prefill_score() == doctest::Approx(0.5));
  CHECK(first.decode_score() == 1.0f);
  const auto second = pd(h, pd_req(blocks(200, 8), "one"));
  CHECK(pair(second) == "DISAGGREGATED p0 d0 Mooncake");
  CHECK(second.decode_score() == 0.0f);
}

TEST_CASE("pd: a short prompt is decode-only; a long miss is a pair near the prefill pick") {
  Harness h = pd_harness();
  // 1,024 tokens < minUncachedTokens 2,048: decode-only on an idle decode
  // replica (all equal: the rendezvous winner of the prompt).
  const auto short_one = pd(h, pd_req(blocks(100, 2)));
  CHECK(pair(short_one) == "DECODE_ONLY_SHORT d0");
  CHECK(short_one.uncached_tokens() == 1024);
  CHECK(short_one.decode_score() == 1.0f);
  CHECK(short_one.prefill_replica_id().empty());
  CHECK(short_one.transport_hint().empty());
  // 4,096 tokens held nowhere: both prefill replicas idle (rendezvous picks
  // p1); the decode replica in p1's rack (affinity 0.2) beats d0 (zone, 0.05)
  // and d2 (none).
  const auto first = pd(h, pd_req(blocks(200, 8)));
  CHECK(pair(first) == "DISAGGREGATED p1 d1 NIXL");
  CHECK(first.uncached_tokens() == 4096);
  CHECK(first.prefill_matched_tokens() == 0);
  CHECK(first.prefill_score() == doctest::Approx(0.5));  // T / (T + T): a full prefill, idle
  CHECK(first.decode_score() == 1.0f);
  // The next long miss: p1 has 409.6 ms booked, p0 none → p0; d0 (the short
  // prompt's slot) and d1 (the first pair's) have one of two slots booked,
  // d2 none: balance first → d2, though d0 is on p0's host.
  const auto second = pd(h, pd_req(blocks(300, 8)));
  CHECK(pair(second) == "DISAGGREGATED p0 d2 NIXL");
  CHECK(second.prefill_score() == doctest::Approx(0.5));
  // A third: both prefill replicas have 409.6 ms queued (tie → rendezvous:
  // p0); every decode replica has one of two slots booked: affinity decides,
  // d0 on p0's host.
  const auto third = pd(h, pd_req(blocks(400, 8)));
  CHECK(pair(third) == "DISAGGREGATED p0 d0 NIXL");
  CHECK(third.prefill_score() == doctest::Approx(409.6 / (409.6 + 819.2)));
}

TEST_CASE("pd: the prefill leg goes to the replica that holds the prefix while it is faster") {
  Harness h = pd_harness();
  // p0 holds the first 6 of 8 blocks: 1,024 tokens to prefill (102.4 ms)
  // against 4,096 on p1 (409.6 ms).
  h.ingest(chain_update("t", "m", "vllm", "p0", kNow, blocks(500, 6), 0, "", kBlock));
  const auto r = pd(h, pd_req(blocks(500, 8)));
  CHECK(pair(r) == "DISAGGREGATED p0 d0 NIXL");
  CHECK(r.prefill_matched_tokens() == 3072);
  CHECK(r.uncached_tokens() == 1024);
  CHECK(r.prefill_score() == doctest::Approx(409.6 / (409.6 + 102.4)));
  CHECK(r.decode_matched_tokens() == 0);
}

TEST_CASE("pd: the prefill leg is picked by the wait itself, whatever --uncached-weight says") {
  Harness h = pd_harness();  // the server's default weight, 0.8
  // p0 holds the first 6 blocks. A first request of those 6 and 5 new ones
  // books 2560 tokens (256 ms) on p0 (5632 tokens, 563.2 ms, on p1).
  h.ingest(chain_update("t", "m", "vllm", "p0", kNow, blocks(500, 6), 0, "", kBlock));
  std::vector<std::uint64_t> first = blocks(500, 6);
  for (std::uint64_t b = 600; b < 605; ++b) first.push_back(b);
  CHECK(pd(h, pd_req(first)).prefill_replica_id() == "p0");
  // Then the 6 blocks and 6 others (6144 tokens; d0 holds the first request's
  // blocks but would prefill 3072 tokens: a pair): wait p0 256 + 307.2 =
  // 563.2 ms < p1 614.4 ms; weighed at 0.8 it would be p1 (256 + 245.76 =
  // 501.76 > 491.52).
  std::vector<std::uint64_t> second = blocks(500, 6);
  for (std::uint64_t b = 700; b < 706; ++b) second.push_back(b);
  const auto r = pd(h, pd_req(second));
  CHECK(r.reason_code() == "DISAGGREGATED");
  CHECK(r.prefill_replica_id() == "p0");
  CHECK(r.prefill_score() == doctest::Approx(614.4 / (614.4 + 563.2)));
}

TEST_CASE("pd: a decode replica that holds the prefix takes the request alone") {
  Harness h = pd_harness();
  // d1 holds 7 of 8 blocks: 512 uncached tokens < 2,048.
  h.ingest(chain_update("t", "m", "vllm", "d1", kNow, blocks(600, 7), 0, "", kBlock));
  const auto r = pd(h, pd_req(blocks(600, 8)));
  CHECK(pair(r) == "DECODE_ONLY_CACHED d1");
  CHECK(r.decode_matched_tokens() == 3584);
  CHECK(r.uncached_tokens() == 512);
  // A pair books the request's blocks on its decode replica: the
  // conversation's next turn (one more block) stays there, decode-only.
  // (Both prefill replicas idle: rendezvous p0, and d0 on its host.)
  const auto turn1 = pd(h, pd_req(blocks(700, 8)));
  CHECK(pair(turn1) == "DISAGGREGATED p0 d0 NIXL");
  const auto turn2 = pd(h, pd_req(blocks(700, 9)));
  CHECK(pair(turn2) == "DECODE_ONLY_CACHED d0");
  CHECK(turn2.decode_matched_tokens() == 4096);
  CHECK(turn2.uncached_tokens() == 512);
  CHECK(turn2.decode_score() == 0.5f);  // turn 1 holds one of d0's two slots
}

TEST_CASE("pd: decode-only while the delay it adds is no longer than a pair's prefill") {
  Harness h = pd_harness();
  // d1 reports 4 decodes running.
  pb::CacheStateUpdate stats = scoped_update("t", "m", "vllm", "d1", kNow);
  stats.mutable_stats()->set_pressure(0.25f);
  h.ingest(stats);
  // d1 holds 7 of 8 blocks of nine prompts: each decode-only answer books
  // its last 512 tokens (51.2 ms) on d1 and one of its 16 slots. A
  // decode-only answer costs d1's own wait × (1 + the decodes running there
  // now: the 4 reported; the ones booked since have not started, their
  // prefills still wait), a pair p0's wait (409.6 ms for the prompt on idle
  // p0, each pair books 409.6 ms more there):
  //   0: 51.2 × 5 = 256 ≤ 409.6       decode-only
  //   1: 102.4 × 5 = 512 > 409.6      pair
  //   2: 102.4 × 5 = 512 ≤ 819.2      decode-only
  //   3: 153.6 × 5 = 768 ≤ 819.2      decode-only
  //   4: 204.8 × 5 = 1024 > 819.2     pair
  //   5: 204.8 × 5 = 1024 ≤ 1228.8    decode-only
  //   6: 256 × 5 = 1280 > 1228.8      pair
  //   7: 256 × 5 = 1280 ≤ 1638.4      decode-only
  //   8: 307.2 × 5 = 1536 ≤ 1638.4    decode-only
  std::vector<std::string> answers;
  for (std::uint64_t k = 0; k < 9; ++k) {
    h.ingest(chain_update("t", "m", "vllm", "d1", kNow, blocks(1000 + 100 * k, 7), 0, "", kBlock));
    answers.push_back(pair(pd(h, pd_req(blocks(1000 + 100 * k, 8), "wide"))));
  }
  const std::string local = "DECODE_ONLY_CACHED d1", paired = "DISAGGREGATED p0 d1 NIXL";
  CHECK(answers ==
        std::vector<std::string>{local, paired, local, local, paired, local, paired, local, local});
  // 10 s later every queue is done and the nine booked decodes have started:
  // 13 run on d1, so its own 51.2 ms costs 51.2 × 14 = 716.8 > 409.6: a pair.
  h.clock.wall += 10'000'000;
  h.ingest(chain_update("t", "m", "vllm", "d1", h.clock.wall, blocks(1900, 7), 0, "", kBlock));
  CHECK(pair(pd(h, pd_req(blocks(1900, 8), "wide"))) == paired);
}

// "wide": p0 and d1 with 16 slots; decode_score is the free share of d1's
// slots before the answer, so it counts the open bookings exactly.
TEST_CASE("pd: decode slots: booked by each answer, freed by eviction, ALL_CLEARED and time") {
  Harness h = pd_harness();
  const auto score = [&](std::uint64_t first) {
    const auto r = pd(h, pd_req(blocks(first, 8), "wide"));
    CHECK(pair(r) == "DISAGGREGATED p0 d1 NIXL");
    return r.decode_score();
  };
  CHECK(score(100) == 1.0f);
  CHECK(score(200) == 0.9375f);
  CHECK(score(300) == 0.875f);
  // d1 evicts the last block of request 100: its KV is gone, its slot free.
  CHECK(h.event(pb::CacheEvent::PREFIX_EVICTED, "t", "m", "d1", hb(107)) == 0);
  CHECK(score(400) == 0.875f);
  // An eviction of another block frees nothing.
  h.event(pb::CacheEvent::PREFIX_EVICTED, "t", "m", "d1", hb(203));
  CHECK(score(500) == 0.8125f);
  // ALL_CLEARED of d1 frees every slot it had.
  h.event(pb::CacheEvent::ALL_CLEARED, "t", "m", "d1");
  CHECK(score(600) == 1.0f);
  // A slot is held through the prefill's estimated wait, then for
  // decodeHoldMs (60 s): request 600 waited for the five prefills booked on
  // p0 before it and its own (6 × 409.6 ms), so 62,457.6 ms later its slot
  // is free without any event (request 700's is not).
  h.clock.wall += 62'457'599;
  CHECK(score(700) == 0.9375f);
  h.clock.wall += 1;
  CHECK(score(800) == 0.9375f);
}

TEST_CASE(
    "pd: no free slot anywhere: the least loaded decode replica, OVERLOADED only when saturated") {
  Harness h = pd_harness();
  // (A lone decode replica with its slot booked: "a request without a
  // prompt ...".) "pd": d0 and d1 saturated by their engines' pressure; d2 takes both of
  // its slots' worth, then a third decode with none free: still d2, the one
  // replica not saturated.
  pb::CacheStateUpdate stats = scoped_update("t", "m", "vllm", "d0", kNow);
  stats.mutable_stats()->set_pressure(1.0f);
  h.ingest(stats);
  stats.set_replica_id("d1");
  stats.mutable_stats()->set_replica_id("d1");
  h.ingest(stats);
  const std::vector<float> free_share = {1.0f, 0.5f, 0.0f};
  for (std::size_t i = 0; i < free_share.size(); ++i) {
    const auto r = pd(h, pd_req(blocks(300 + 100 * i, 8)));
    CHECK(r.reason_code() == "DISAGGREGATED");
    CHECK(r.decode_replica_id() == "d2");
    CHECK(r.decode_score() == free_share[i]);
  }
  // d2 saturated too: every engine says so.
  stats.set_replica_id("d2");
  stats.mutable_stats()->set_replica_id("d2");
  h.ingest(stats);
  CHECK(pair(pd(h, pd_req(blocks(600, 8)))) == "OVERLOADED");
}

TEST_CASE("pd: a replica whose slots are booked full is passed over while another has one free") {
  Harness h = pd_harness();
  const auto decode = [&](std::uint64_t first) {
    return pd(h, pd_req(blocks(first, 8), "uneven")).decode_replica_id();
  };
  // Both idle: affinity, da on p0's host. Then db, the one with a free slot,
  // 15 times; then db's last slot (15/16 booked), not da (full), though
  // da's cost is lower (1 + 0 against 15/16 + 0.5) and it is within half of
  // its slot of the least loaded. Every slot booked: affinity again.
  CHECK(decode(100) == "da");
  for (std::uint64_t k = 1; k <= 15; ++k) CHECK(decode(100 + 100 * k) == "db");
  CHECK(decode(1700) == "db");
  CHECK(decode(1800) == "da");
}

TEST_CASE(
    "pd: a full replica in the prefill's required domain takes the decode over a free one outside "
    "it") {
  Harness h = pd_harness();
  // zone1: d0 is p0's only decode replica in zone z0; d3's free slot is in
  // z1, where no prefill replica is.
  CHECK(pair(pd(h, pd_req(blocks(100, 8), "zone1"))) == "DISAGGREGATED p0 d0 Direct");
  const auto second = pd(h, pd_req(blocks(200, 8), "zone1"));
  CHECK(pair(second) == "DISAGGREGATED p0 d0 Direct");
  CHECK(second.decode_score() == 0.0f);
  // A short prompt needs no prefill replica: d3's free slot.
  CHECK(pair(pd(h, pd_req(blocks(300, 2), "zone1"))) == "DECODE_ONLY_SHORT d3");
}

TEST_CASE("pd: a full replica holding the prefix still takes a decode-only answer") {
  Harness h = pd_harness();
  // da's one slot booked; then da holds 7 of request 500's 8 blocks: its own
  // prefill (51.2 ms) beats p0's (819.2 ms), and no other decode replica
  // could prefill it itself, so da answers though db has 16 slots free (the
  // trade-off of docs/pd-routing.md "Model" step 2).
  CHECK(pair(pd(h, pd_req(blocks(100, 8), "uneven"))) == "DISAGGREGATED p0 da NIXL");
  h.ingest(chain_update("t", "m", "vllm", "da", kNow, blocks(500, 7), 0, "", kBlock));
  const auto cached = pd(h, pd_req(blocks(500, 8), "uneven"));
  CHECK(pair(cached) == "DECODE_ONLY_CACHED da");
  CHECK(cached.decode_score() == 0.0f);
}

TEST_CASE("pd: a prefill replica with a free decode replica in its domain goes first") {
  Harness h = pd_harness();
  // p0 holds 7 of the 8 blocks of prompts 100 and 200: prompt 100 pairs p0
  // with d0, d0's one slot. Prompt 200 would still be sooner on p0 (two
  // blocks, 102.4 ms, against p1's 409.6), but d0 is full and d3, in p1's
  // zone, is free.
  h.ingest(chain_update("t", "m", "vllm", "p0", kNow, blocks(100, 7), 0, "", kBlock));
  h.ingest(chain_update("t", "m", "vllm", "p0", kNow, blocks(200, 7), 0, "", kBlock));
  CHECK(pair(pd(h, pd_req(blocks(100, 8), "zone2"))) == "DISAGGREGATED p0 d0 Direct");
  CHECK(pair(pd(h, pd_req(blocks(200, 8), "zone2"))) == "DISAGGREGATED p1 d3 Direct");
}

TEST_CASE("pd: a decode replica saturated by its reported pressure is full") {
  Harness h = pd_harness();
  pb::CacheStateUpdate stats = scoped_update("t", "m", "vllm", "d0", kNow);
  stats.mutable_stats()->set_pressure(1.0f);
  h.ingest(stats);
  CHECK(pair(pd(h, pd_req(blocks(100, 8), "one"))) == "OVERLOADED");
  stats.mutable_stats()->set_pressure(0.5f);
  h.ingest(stats);
  CHECK(pair(pd(h, pd_req(blocks(100, 8), "one"))) == "DISAGGREGATED p0 d0 Mooncake");
}

TEST_CASE("pd: no prefill pool, and no decode replica in the required domain") {
  Harness h = pd_harness();
  const auto nopf = pd(h, pd_req(blocks(100, 8), "nopf"));
  CHECK(pair(nopf) == "NO_PREFILL_POOL d0");
  CHECK(nopf.uncached_tokens() == 4096);
  // zoned: p0 (z0) holds the prefix but only p1 shares a zone with d2.
  h.ingest(chain_update("t", "m", "vllm", "p0", kNow, blocks(200, 6), 0, "", kBlock));
  const auto zoned = pd(h, pd_req(blocks(200, 8), "zoned"));
  CHECK(pair(zoned) == "DISAGGREGATED p1 d2 Direct");
  CHECK(zoned.prefill_matched_tokens() == 0);
  // p1 saturated by its pressure: p0, the one candidate left, has no decode
  // replica in its zone.
  pb::CacheStateUpdate stats = scoped_update("t", "m", "vllm", "p1", kNow);
  stats.mutable_stats()->set_pressure(1.0f);
  h.ingest(stats);
  CHECK(pair(pd(h, pd_req(blocks(300, 8), "zoned"))) == "NO_DECODE_IN_DOMAIN");
  // A short prompt needs no prefill replica: the domain does not matter.
  CHECK(pair(pd(h, pd_req(blocks(400, 2), "zoned"))) == "DECODE_ONLY_SHORT d2");
}

TEST_CASE("pd: an unknown tenant is priced from the topology alone, with nothing booked") {
  Harness h = pd_harness();
  CHECK(pair(pd(h, pd_req(blocks(100, 8), "pd", "new"))) == "DISAGGREGATED p1 d1 NIXL");
  // No scope to book in: the same answer again.
  CHECK(pair(pd(h, pd_req(blocks(100, 8), "pd", "new"))) == "DISAGGREGATED p1 d1 NIXL");
}

TEST_CASE("pd: affinity never costs a booked decode slot of balance") {
  Harness h = pd_harness();
  // Both idle: the same load, so affinity decides: d0 on p0's host.
  CHECK(pair(pd(h, pd_req(blocks(100, 8), "bal"))) == "DISAGGREGATED p0 d0 NIXL");
  // d0 has 1 of 16 slots booked, d2 none: with affinity alone d0 would still
  // win (1/16 + 0 < 0 + 0.5 × 1), but only d2 is within half a slot of the
  // least loaded.
  CHECK(pair(pd(h, pd_req(blocks(200, 8), "bal"))) == "DISAGGREGATED p0 d2 NIXL");
  // Equal again (1 each): affinity decides again.
  CHECK(pair(pd(h, pd_req(blocks(300, 8), "bal"))) == "DISAGGREGATED p0 d0 NIXL");
}

TEST_CASE("pd: decode load is the reported running decodes plus the bookings since the report") {
  Harness h = pd_harness();
  const auto report = [&](const std::string& replica, float pressure) {
    pb::CacheStateUpdate stats = scoped_update("t", "m", "vllm", replica, h.clock.wall);
    stats.mutable_stats()->set_pressure(pressure);
    h.ingest(stats);
  };
  // "bal": 16 slots each; d0 reports 4 running, d2 6.
  report("d0", 0.25f);
  report("d2", 0.375f);
  // A burst before the next report: each pair counts on its decode replica
  // at once (4, 5 → d0; 6 and 6: affinity, d0; 7 against 6 → d2; 7 and 7 →
  // d0). The higher of bookings and pressure would have sent all five to d0.
  std::vector<std::string> burst;
  for (std::uint64_t k = 0; k < 5; ++k)
    burst.push_back(pair(pd(h, pd_req(blocks(100 * (k + 1), 8), "bal"))));
  const std::string to_d0 = "DISAGGREGATED p0 d0 NIXL", to_d2 = "DISAGGREGATED p0 d2 NIXL";
  CHECK(burst == std::vector<std::string>{to_d0, to_d0, to_d0, to_d2, to_d0});
  // 5 s later every one of them has started (p0's waits end by 2,048 ms),
  // and the engines' reports count them (and one more decode on d0): d0 9
  // running, d2 7. The bookings started before the report are not counted
  // again: 7 → d2, then 8 against 9 → d2, then 9 and 9 → d0.
  h.clock.wall += 5'000'000;
  report("d0", 0.5625f);
  report("d2", 0.4375f);
  std::vector<std::string> after;
  for (std::uint64_t k = 5; k < 8; ++k)
    after.push_back(pair(pd(h, pd_req(blocks(100 * (k + 1), 8), "bal"))));
  CHECK(after == std::vector<std::string>{to_d2, to_d2, to_d0});
  // d0 10, d2 9 → d2; decode_score is d2's free fraction before it, 7 of 16.
  const auto next = pd(h, pd_req(blocks(1000, 8), "bal"));
  CHECK(pair(next) == to_d2);
  CHECK(next.decode_score() == doctest::Approx(7.0 / 16));
}

namespace {

// On topology "wide" (p0; d1 with 16 slots): a pair books the whole 8-block
// prompt (4,096 tokens, 409.6 ms) on idle p0, so the scope's mean booking is
// 4,096; 200 ms later d1 stores 7 blocks of the next prompt and its pressure
// readings 1/16 … 4/16 show their step (a count of 4). Returns the answer for
// that next prompt. Decode-only costs d1's own 51.2 ms × (1 + 4 running) =
// 256 ms, a pair p0's 209.6 ms left + 409.6 = 619.2 ms; read as prefill
// requests, d1's 4 would floor its queue at 4 × 4,096 tokens (1,638.4 ms) and
// decode-only would cost (1,638.4 + 51.2) × 5 = 8,448 ms.
std::string answer_after_counted_pressure(Harness& h) {
  CHECK(pair(pd(h, pd_req(blocks(500, 8), "wide"))) == "DISAGGREGATED p0 d1 NIXL");
  h.clock.wall += 200'000;
  h.ingest(chain_update("t", "m", "vllm", "d1", h.clock.wall, blocks(1000, 7), 0, "", kBlock));
  for (const float p : {0.0625f, 0.125f, 0.1875f, 0.25f}) {
    pb::CacheStateUpdate stats = scoped_update("t", "m", "vllm", "d1", h.clock.wall);
    stats.mutable_stats()->set_pressure(p);
    h.ingest(stats);
  }
  return pair(pd(h, pd_req(blocks(1000, 8), "wide")));
}

// kTopologies plus "mixed", where d1 is also a prefill replica.
std::string with_mixed_topology() {
  std::string doc = kTopologies;
  doc.insert(doc.rfind("]}"), R"(,{"name":"mixed","transport":"NIXL",)"
                              R"("prefill":[{"replica":"d1"}],"decode":[{"replica":"d0"}]})");
  return doc;
}

}  // namespace

TEST_CASE("pd: a decode replica's counted pressure does not price its prefill queue") {
  Harness h = pd_harness();
  CHECK(answer_after_counted_pressure(h) == "DECODE_ONLY_CACHED d1");
}

TEST_CASE("pd: a replica that also prefills for a topology keeps the count rule") {
  // d1 is also the prefill replica of topology "mixed": its pressure may
  // count prefill requests, so it is read as such (the floor holds).
  Harness h = pd_harness();
  h.policy(with_mixed_topology());
  CHECK(answer_after_counted_pressure(h) == "DISAGGREGATED p0 d1 NIXL");
}

TEST_CASE("pd: a replica made decode-only by a policy reload loses its floor at its next report") {
  Harness h = pd_harness();
  h.policy(with_mixed_topology());
  CHECK(answer_after_counted_pressure(h) == "DISAGGREGATED p0 d1 NIXL");
  // "mixed" gone: d1 only decodes. Its floor (4 requests counted, 1 booked)
  // ends with its next counted report, not before.
  h.policy(kTopologies);
  CHECK(pair(pd(h, pd_req(blocks(1000, 8), "wide"))) == "DISAGGREGATED p0 d1 NIXL");
  pb::CacheStateUpdate stats = scoped_update("t", "m", "vllm", "d1", h.clock.wall);
  stats.mutable_stats()->set_pressure(0.25f);
  h.ingest(stats);
  CHECK(pair(pd(h, pd_req(blocks(1000, 8), "wide"))) == "DECODE_ONLY_CACHED d1");
}
