// The work-aware ranking (docs/ranking.md): the wait until the first token from
// booked prefill work and learned rates (the request's own prefill weighed at
// --uncached-weight in the pick), bookings as speculative entries, how a
// booking ends, and NO_HINT for a miss in a scope of one known replica. Issue 26
// acceptance 4, with exact answers. The clock is the harness's ManualClock; the
// prefill rate before one is learned is the flag's default, 10,000 tokens/s, so
// a 512-token block is 51.2 ms of work.

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "helpers.hh"

using namespace ic::index;
using namespace ic::index::test;

namespace {

constexpr std::int32_t kBlock = 512;  // tokens per block in these inputs

// A stats-only update of `replica` for (t, m) at pressure 0.
pb::CacheStateUpdate idle_stats(const std::string& replica, std::int64_t ts) {
  pb::CacheStateUpdate u = scoped_update("t", "m", "vllm", replica, ts);
  u.mutable_stats()->set_pressure(0.0f);
  return u;
}

// Eight replicas r0..r7 known in the scope (t, m, vllm): each holds one
// unrelated block, so no request below matches anything stored; with
// `stats`, each also reported ReplicaStats.
void eight_replicas(Harness& h, bool stats = true) {
  const char* names[] = {"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"};
  for (std::uint64_t i = 0; i < 8; ++i) {
    h.ingest(chain_update("t", "m", "vllm", names[i], kNow, {100 + i}, 0, "", kBlock));
    if (stats) h.ingest(idle_stats(names[i], kNow));
  }
}

// A shard ranking by work with the server's defaults.
Harness work_harness() { return Harness({}, nullptr, ic::config::Ranking::kWorkAware); }

// The same with --uncached-weight 1: the pick minimizes the estimated wait
// itself. For the scenarios written in waits (the booking mechanics); the
// default weight is tested on its own below.
Harness wait_harness() {
  IndexConfig cfg;
  cfg.work_aware.uncached_weight = 1.0;
  return Harness(cfg, nullptr, ic::config::Ranking::kWorkAware);
}

// "REASON replica" of the top answer.
std::string top(const pb::LookupRouteResponse& r) {
  if (r.replica_scores_size() == 0) return r.reason_code();
  return r.reason_code() + " " + r.replica_scores(0).replica_id();
}

// The work row of `replica` in (t, m, vllm); a default row when there is none.
WorkRow work_row(Harness& h, const std::string& replica) {
  for (const WorkRow& w : h.shard->collect_snapshot().work) {
    if (w.tenant == "t" && w.model == "m" && w.hash_scheme == "vllm" && w.replica_id == replica)
      return w;
  }
  return WorkRow{};
}

// "REASON replica" as top() prints it.
std::string named(std::string_view reason, const std::string& replica) {
  std::string s(reason);
  s.push_back(' ');
  s.append(replica);
  return s;
}

// The replica of a one-replica top answer.
std::string replica_of(const pb::LookupRouteResponse& r) {
  return r.replica_scores_size() > 0 ? r.replica_scores(0).replica_id() : std::string();
}

std::vector<std::uint64_t> blocks(std::uint64_t first, std::size_t n) {
  std::vector<std::uint64_t> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back(first + i);
  return v;
}

// Misses of (t, m, vllm): two new blocks each (1,024 tokens), a new prompt per call.
struct Misses {
  Harness& h;
  std::uint64_t next = 1000;
  pb::LookupRouteResponse lookup() {
    next += 1000;
    return h.lookup(chain_req("t", "m", "vllm", blocks(next, 2), kBlock));
  }
  std::string reason() { return lookup().reason_code(); }
};

// r0 … r<n−1> report their one entry (block 100 + i) again at h.clock.wall.
void refresh(Harness& h, std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; ++i)
    h.ingest(chain_update("t", "m", "vllm", "r" + std::to_string(i), h.clock.wall, {100 + i}, 0, "",
                          kBlock));
}

}  // namespace

TEST_CASE("work-aware: a burst of 20 misses over 8 known replicas spreads by outstanding work") {
  Harness h = work_harness();
  eight_replicas(h);
  // Request i has 1 + i % 3 new blocks (512..1536 tokens); the clock stands
  // still, so each replica's queue is exactly the tokens booked on it.
  std::vector<std::string> answers;
  for (std::uint64_t i = 0; i < 20; ++i)
    answers.push_back(
        top(h.lookup(chain_req("t", "m", "vllm", blocks(1000 * (i + 1), 1 + i % 3), kBlock))));
  // The first eight go to the eight idle replicas (each booking makes its
  // replica the busiest); from then on every miss goes to the replica with
  // the least booked work (equal work: the rendezvous order of the prompt).
  // Sizes 1, 2, 3, 1, 2, 3, … blocks; booked tokens after each answer in the comments.
  const std::vector<std::string> want = {
      "AFFINITY_HINT r2",   // r2 512
      "AFFINITY_HINT r7",   // r7 1024
      "AFFINITY_HINT r1",   // r1 1536
      "AFFINITY_HINT r3",   // r3 512
      "AFFINITY_HINT r5",   // r5 1024
      "AFFINITY_HINT r4",   // r4 1536
      "AFFINITY_HINT r6",   // r6 512
      "AFFINITY_HINT r0",   // r0 1024: every replica busy now
      "AFFINITY_HINT r3",   // 512 (r2, r3, r6 tied: rendezvous) → 2048
      "AFFINITY_HINT r6",   // 512 (r2, r6) → 1024
      "AFFINITY_HINT r2",   // 512 → 1536
      "AFFINITY_HINT r0",   // 1024 (r7, r5, r0, r6) → 2560
      "AFFINITY_HINT r7",   // 1024 (r7, r5, r6) → 1536
      "AFFINITY_HINT r5",   // 1024 (r5, r6) → 2048
      "AFFINITY_HINT r6",   // 1024 → 2560
      "AFFINITY_HINT r2",   // 1536 (r1, r4, r2, r7) → 2048
      "AFFINITY_HINT r4",   // 1536 (r1, r4, r7) → 2560
      "AFFINITY_HINT r7",   // 1536 (r1, r7) → 3072
      "AFFINITY_HINT r1",   // 1536 → 2048
      "AFFINITY_HINT r2"};  // 2048 (r3, r5, r2, r1) → 3072
  CHECK(answers == want);
  // Booked tokens per replica: 39 blocks of 512 over 8 replicas, within one request.
  std::map<std::string, std::int64_t> booked;
  for (const WorkRow& w : h.shard->collect_snapshot().work) booked[w.replica_id] = w.booked_tokens;
  CHECK(booked == std::map<std::string, std::int64_t>{{"r0", 2560},
                                                      {"r1", 2048},
                                                      {"r2", 3072},
                                                      {"r3", 2048},
                                                      {"r4", 2560},
                                                      {"r5", 2048},
                                                      {"r6", 2560},
                                                      {"r7", 3072}});
}

TEST_CASE("work-aware: a burst of one new shared prefix follows its first booking, then moves on") {
  Harness h = wait_harness();
  eight_replicas(h);
  // Shared prefix: 16 blocks (8192 tokens, 819.2 ms); each request adds one
  // block of its own (51.2 ms). The full prefill of a request: 870.4 ms.
  auto request = [](std::uint64_t i) {
    std::vector<std::uint64_t> chain = blocks(5000, 16);
    chain.push_back(9000 + i);
    return chain_req("t", "m", "vllm", chain, kBlock);
  };
  std::vector<std::string> answers;
  std::vector<std::int32_t> matched;
  auto ask = [&](std::uint64_t i) {
    const auto r = h.lookup(request(i));
    answers.push_back(top(r));
    matched.push_back(r.replica_scores_size() > 0 ? r.replica_scores(0).matched_tokens() : -1);
  };
  ask(0);  // t = 0: a miss, booked on its replica until 870.4 ms
  h.clock.wall += 100'000;
  ask(1);  // t = 100 ms: 770.4 queued + 51.2 < 870.4 elsewhere
  h.clock.wall += 100'000;
  ask(2);  // t = 200 ms: 721.6 + 51.2
  // A burst at t = 200 ms: the first replica's wait grows by 51.2 ms per request
  // (824.0, then 875.2 > 870.4); then the next idle replica, whose booking
  // makes it as busy as a full prefill, and so on.
  for (std::uint64_t i = 3; i < 7; ++i) ask(i);
  const std::vector<std::string> want = {"AFFINITY_HINT r7", "PREFIX_MATCH r7",  "PREFIX_MATCH r7",
                                         "PREFIX_MATCH r7",  "AFFINITY_HINT r6", "AFFINITY_HINT r1",
                                         "AFFINITY_HINT r0"};
  for (int i = 1; i < 4; ++i) CHECK(matched[i] == 16 * kBlock);  // the booked prefix
  CHECK(answers == want);
  // The speculative entries are not stored entries: GetCacheState still
  // counts the eight unrelated blocks only.
  CHECK(h.cache_state("t", "m").summary().total_prefixes() == 8);
}

TEST_CASE(
    "work-aware: the default weight of the request's own prefill (0.8) leaves a holder whose "
    "queue is close to the prefill it saves") {
  // The burst above at t = 250 ms: the shared prefix (16 blocks, 819.2 ms)
  // booked at t = 0 on r7 until 870.4 ms. Each request's own block is 51.2 ms;
  // a full prefill 870.4 ms.
  auto request = [](std::uint64_t i) {
    std::vector<std::uint64_t> chain = blocks(5000, 16);
    chain.push_back(9000 + i);
    return chain_req("t", "m", "vllm", chain, kBlock);
  };
  auto burst = [&](Harness& h) {
    eight_replicas(h);
    std::vector<std::string> answers{top(h.lookup(request(0)))};
    h.clock.wall += 250'000;
    const auto second = h.lookup(request(1));
    answers.push_back(top(second));
    answers.push_back(top(h.lookup(request(2))));
    return std::make_pair(answers, second.replica_scores(0).score());
  };
  // Weight 0.8: r7 costs 620.4 + 0.8 × 51.2 = 661.36 ms against 0.8 × 870.4 =
  // 696.32 ms on an idle replica, so the second request follows (score
  // 870.4 / (870.4 + 661.36)); then 671.6 + 40.96 = 712.56 ms > 696.32: the
  // third seeds the prefix on an idle replica (r3, the rendezvous winner of
  // its prompt among the idle ones), though its wait there (870.4 ms) is
  // longer than on r7 (722.8 ms).
  Harness h = work_harness();
  const auto [answers, score] = burst(h);
  CHECK(answers ==
        std::vector<std::string>{"AFFINITY_HINT r7", "PREFIX_MATCH r7", "AFFINITY_HINT r3"});
  CHECK(score == doctest::Approx(870.4 / (870.4 + 661.36)));
  // Weight 1: the wait itself, 722.8 ms < 870.4 ms: the third follows too.
  Harness w = wait_harness();
  const auto [waits, wait_score] = burst(w);
  CHECK(waits ==
        std::vector<std::string>{"AFFINITY_HINT r7", "PREFIX_MATCH r7", "PREFIX_MATCH r7"});
  CHECK(wait_score == doctest::Approx(870.4 / (870.4 + 671.6)));
}

TEST_CASE(
    "work-aware: two holders whose order by wait and by cost differ are listed and booked by "
    "cost") {
  // r0 stores the prompt's first 16 blocks, r1 its first 8. The prompt has 20
  // blocks (10240 tokens, 1024 ms): 2048 tokens (204.8 ms) left on r0, 6144
  // (614.4 ms) on r1. First a request of the 16 blocks and 7 new ones books its
  // 3584 tokens on r0 (358.4 ms; 768 ms on r1, 1177.6 ms elsewhere).
  // Then, for the prompt: wait r0 358.4 + 204.8 = 563.2 < r1 614.4, but
  // cost r0 358.4 + 0.8 × 204.8 = 522.24 > r1 0.8 × 614.4 = 491.52.
  auto run = [](Harness& h) {
    eight_replicas(h);
    h.ingest(chain_update("t", "m", "vllm", "r0", kNow, blocks(7000, 16), 0, "", kBlock));
    h.ingest(chain_update("t", "m", "vllm", "r1", kNow, blocks(7000, 8), 0, "", kBlock));
    std::vector<std::uint64_t> first = blocks(7000, 16);
    for (std::uint64_t b = 8000; b < 8007; ++b) first.push_back(b);
    CHECK(top(h.lookup(chain_req("t", "m", "vllm", first, kBlock))) == "PREFIX_MATCH r0");
    CHECK(work_row(h, "r0").booked_tokens == 3584);
    return h.lookup(chain_req("t", "m", "vllm", blocks(7000, 20), kBlock));
  };
  Harness h = work_harness();
  const auto r = run(h);
  REQUIRE(r.replica_scores_size() == 2);
  CHECK(r.replica_scores(0).replica_id() == "r1");
  CHECK(r.replica_scores(0).score() == doctest::Approx(1024.0 / (1024.0 + 491.52)));
  CHECK(r.replica_scores(0).matched_tokens() == 8 * kBlock);
  CHECK(r.replica_scores(1).replica_id() == "r0");
  CHECK(r.replica_scores(1).score() == doctest::Approx(1024.0 / (1024.0 + 522.24)));
  CHECK(work_row(h, "r1").booked_tokens == 6144);  // the first listed is booked
  CHECK(work_row(h, "r0").booked_tokens == 3584);
  // Weight 1: by wait, r0 first and booked.
  Harness w = wait_harness();
  const auto by_wait = run(w);
  REQUIRE(by_wait.replica_scores_size() == 2);
  CHECK(by_wait.replica_scores(0).replica_id() == "r0");
  CHECK(by_wait.replica_scores(0).score() == doctest::Approx(1024.0 / (1024.0 + 563.2)));
  CHECK(work_row(w, "r0").booked_tokens == 3584 + 2048);
  CHECK(work_row(w, "r1").booked_tokens == 0);
}

TEST_CASE("work-aware: a booking ends on its completion report, and the rate is learned") {
  Harness h = work_harness();
  eight_replicas(h);
  const auto chain = blocks(7000, 2);  // 1024 tokens
  const std::string r = replica_of(h.lookup(chain_req("t", "m", "vllm", chain, kBlock)));
  WorkRow w = work_row(h, r);
  CHECK(w.open_bookings == 1);
  CHECK(w.booked_tokens == 1024);
  CHECK(w.hints == 1);
  // The replica reports the blocks 200 ms later: 1024 tokens in 0.2 s.
  h.clock.wall += 200'000;
  h.ingest(chain_update("t", "m", "vllm", r, h.clock.wall, chain, 0, "", kBlock));
  w = work_row(h, r);
  CHECK(w.open_bookings == 0);
  CHECK(w.booked_tokens == 0);
  CHECK(w.bookings_completed == 1);
  CHECK(w.bookings_expired == 0);
  CHECK(w.prefill_tokens_per_s == doctest::Approx(5120.0));
  CHECK(w.completion_us == 200'000);
  // Now stored: the same prompt is a PREFIX_MATCH with nothing to book, and
  // the hint predicted its 1024 hit tokens.
  const auto again = h.lookup(chain_req("t", "m", "vllm", chain, kBlock));
  CHECK(top(again) == named("PREFIX_MATCH", r));
  w = work_row(h, r);
  CHECK(w.open_bookings == 0);
  CHECK(w.hints == 2);
  CHECK(w.predicted_hit_tokens == 1024);
}

TEST_CASE("work-aware: predicted hit tokens beside the engine's own counters") {
  Harness h = work_harness();
  eight_replicas(h);
  const auto chain = blocks(7000, 2);  // 1024 tokens
  const std::string r = replica_of(h.lookup(chain_req("t", "m", "vllm", chain, kBlock)));
  h.clock.wall += 200'000;
  h.ingest(chain_update("t", "m", "vllm", r, h.clock.wall, chain, 0, "", kBlock));
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", chain, kBlock))) == named("PREFIX_MATCH", r));
  // The adapter's next stats carry the engine's cumulative counters: it hit
  // 1024 of the 2048 prompt tokens the two requests brought.
  pb::CacheStateUpdate stats = idle_stats(r, h.clock.wall);
  stats.mutable_stats()->set_prefix_cache_hit_tokens(1024);
  stats.mutable_stats()->set_prefix_cache_query_tokens(2048);
  h.ingest(stats);
  const WorkRow w = work_row(h, r);
  CHECK(w.hints == 2);
  CHECK(w.hinted_tokens == 2048);
  CHECK(w.predicted_hit_tokens == 1024);
  CHECK(w.engine_hit_tokens == 1024);
  CHECK(w.engine_query_tokens == 2048);
  // The /metrics rows: every held ReplicaStats (r0..r7, in report order), then
  // the scope's one work record.
  std::vector<std::string> rows;
  h.shard->for_each_replica_hits([&rows](const ReplicaHitRow& row) {
    rows.push_back(std::string(row.model) + " " + std::string(row.replica) + " " +
                   std::to_string(row.hints) + " " + std::to_string(row.hinted_tokens) + " " +
                   std::to_string(row.predicted_hit_tokens) + " " +
                   std::to_string(row.engine_hit_tokens) + " " +
                   std::to_string(row.engine_query_tokens) + (row.engine_reported ? " E" : " W"));
  });
  std::vector<std::string> want;
  for (const char* name : {"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"}) {
    std::string row = "m ";
    row += name;
    row += name == r ? " 0 0 0 1024 2048 E" : " 0 0 0 0 0 E";
    want.push_back(row);
  }
  want.push_back("m " + r + " 2 2048 1024 0 0 W");
  CHECK(rows == want);
}

TEST_CASE("work-aware: a booking never completed ends at its learned bound") {
  Harness h = work_harness();
  eight_replicas(h);
  // One timed completion on r: 1024 tokens in 200 ms (bound = 4 × 200 ms).
  const auto chain = blocks(7000, 2);
  const std::string r = replica_of(h.lookup(chain_req("t", "m", "vllm", chain, kBlock)));
  h.clock.wall += 200'000;
  h.ingest(chain_update("t", "m", "vllm", r, h.clock.wall, chain, 0, "", kBlock));
  // A prompt that extends the stored one by two blocks goes to r (it holds
  // the first two), books 1024 tokens there (200 ms at the learned rate, so
  // the bound is max(2 × 200, 4 × 200) = 800 ms), and its report never comes.
  auto longer = blocks(7000, 4);
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", longer, kBlock))) == named("PREFIX_MATCH", r));
  CHECK(work_row(h, r).open_bookings == 1);
  CHECK(work_row(h, r).booked_tokens == 1024);
  // A fully stored prompt (books nothing) lets the scope check its bounds.
  h.clock.wall += 799'999;
  h.lookup(chain_req("t", "m", "vllm", chain, kBlock));
  CHECK(work_row(h, r).open_bookings == 1);
  h.clock.wall += 1;
  h.lookup(chain_req("t", "m", "vllm", chain, kBlock));
  const WorkRow w = work_row(h, r);
  CHECK(w.open_bookings == 0);
  CHECK(w.booked_tokens == 0);
  CHECK(w.bookings_completed == 1);
  CHECK(w.bookings_expired == 1);
}

TEST_CASE("work-aware: a later completion ends the older bookings it overtook") {
  Harness h = work_harness();
  eight_replicas(h);
  // Two bookings on one replica (the second prompt follows the first's
  // booked blocks); only the second one's report arrives: the first was not
  // sent there, since prefill runs in arrival order.
  const std::string r = replica_of(h.lookup(chain_req("t", "m", "vllm", blocks(7000, 8), kBlock)));
  // At 400 ms the first booking (409.6 ms) is nearly done there: a prompt
  // sharing its first seven blocks waits 9.6 + 51.2 ms there.
  h.clock.wall += 400'000;
  auto second = blocks(7000, 7);
  second.push_back(8000);
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", second, kBlock))) == named("PREFIX_MATCH", r));
  CHECK(work_row(h, r).open_bookings == 2);
  h.clock.wall += 500'000;
  h.ingest(chain_update("t", "m", "vllm", r, h.clock.wall, second, 0, "", kBlock));
  const WorkRow w = work_row(h, r);
  CHECK(w.open_bookings == 0);
  CHECK(w.bookings_completed == 1);
  CHECK(w.bookings_expired == 1);
  // 512 tokens from max(booked, previous completion) = 400 ms to 900 ms.
  CHECK(w.prefill_tokens_per_s == doctest::Approx(1024.0));
}

TEST_CASE(
    "work-aware: a prompt another replica stored ends its booking (the gateway sent it there)") {
  Harness h = work_harness();
  eight_replicas(h);
  const auto chain = blocks(7000, 4);  // 2048 tokens: 204.8 ms booked
  const std::string r = replica_of(h.lookup(chain_req("t", "m", "vllm", chain, kBlock)));
  const std::string other = r == "r0" ? "r1" : "r0";
  CHECK(work_row(h, r).open_bookings == 1);
  // The gateway ignored the hint: 100 ms later `other` reports the prompt.
  h.clock.wall += 100'000;
  h.ingest(chain_update("t", "m", "vllm", other, h.clock.wall, chain, 0, "", kBlock));
  const WorkRow w = work_row(h, r);
  CHECK(w.open_bookings == 0);
  CHECK(w.booked_tokens == 0);
  CHECK(w.bookings_completed == 0);
  CHECK(w.bookings_expired == 1);
  // The next turn extends the prompt: it follows the stored blocks to `other`
  // (102.4 ms for its 1024 new tokens), not the ended booking to `r`, whose
  // queue is empty again (307.2 ms for all 3072 tokens, as on any idle replica).
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", blocks(7000, 6), kBlock))) ==
        named("PREFIX_MATCH", other));
}

TEST_CASE(
    "work-aware: pressure 0 ends the replica's bookings made before it (the gateway sent "
    "them elsewhere)") {
  Harness h = wait_harness();
  eight_replicas(h);
  // Two misses of 20 blocks (10240 tokens, 1024 ms each) booked 150 ms apart
  // on one replica: the second follows the first's booked blocks.
  auto first = blocks(7000, 20);
  const std::string r = replica_of(h.lookup(chain_req("t", "m", "vllm", first, kBlock)));
  h.clock.wall += 150'000;
  auto second = blocks(7000, 20);
  second.push_back(8000);
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", second, kBlock))) == named("PREFIX_MATCH", r));
  CHECK(work_row(h, r).open_bookings == 2);
  CHECK(work_row(h, r).booked_tokens == 10240 + 512);
  // 60 ms later the replica reports pressure 0: nothing running or waiting.
  // The first booking (210 ms old) was not sent there; the second, 60 ms old,
  // may not have reached the engine yet (100 ms grace): it stays.
  h.clock.wall += 60'000;
  h.ingest(idle_stats(r, h.clock.wall));
  WorkRow w = work_row(h, r);
  CHECK(w.open_bookings == 1);
  CHECK(w.booked_tokens == 512);
  CHECK(w.bookings_expired == 1);
  // Its queue is now the 512 tokens left (51.2 ms): a miss of 1024 tokens
  // waits 153.6 ms there, against 102.4 ms on the idle replicas.
  CHECK(replica_of(h.lookup(chain_req("t", "m", "vllm", blocks(9000, 2), kBlock))) != r);
  // A report of pressure 0.5 ends nothing.
  h.clock.wall += 200'000;
  pb::CacheStateUpdate busy = idle_stats(r, h.clock.wall);
  busy.mutable_stats()->set_pressure(0.5f);
  h.ingest(busy);
  CHECK(work_row(h, r).open_bookings == 1);
  // Pressure 0 again, now 260 ms after it: it ends.
  h.ingest(idle_stats(r, h.clock.wall));
  w = work_row(h, r);
  CHECK(w.open_bookings == 0);
  CHECK(w.booked_tokens == 0);
  CHECK(w.bookings_expired == 2);
  CHECK(w.bookings_completed == 0);
}

// A stats-only update of `replica` for (t, m) at `pressure`.
pb::CacheStateUpdate stats_at(const std::string& replica, std::int64_t ts, float pressure) {
  pb::CacheStateUpdate u = idle_stats(replica, ts);
  u.mutable_stats()->set_pressure(pressure);
  return u;
}

TEST_CASE(
    "work-aware: a pressure that counts requests displaces the bookings beyond that count to a "
    "replica counting unbooked requests") {
  Harness h = wait_harness();
  eight_replicas(h);
  // Every replica reports pressures of 1, 2, 3 and 1 requests over a ceiling
  // of 16 (the replay's): the step 1/16 is one request from the fourth
  // changed reading on. Nothing is booked yet, so nothing moves.
  for (const char* name : {"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"}) {
    for (const float p : {1.0f / 16, 2.0f / 16, 3.0f / 16, 1.0f / 16})
      h.ingest(stats_at(name, kNow, p));
  }
  // Three bookings on one replica, 150 ms apart: a miss of 20 blocks (10240
  // tokens), then two turns that extend it by one block (512 tokens each)
  // and follow its booked blocks there.
  auto first = blocks(7000, 20);
  const std::string r = replica_of(h.lookup(chain_req("t", "m", "vllm", first, kBlock)));
  const std::string q = r == "r0" ? "r1" : "r0";
  for (const std::uint64_t extra : {8000, 8001}) {
    h.clock.wall += 150'000;
    auto next = first;
    next.push_back(extra);
    CHECK(top(h.lookup(chain_req("t", "m", "vllm", next, kBlock))) == named("PREFIX_MATCH", r));
  }
  CHECK(work_row(h, r).open_bookings == 3);
  CHECK(work_row(h, r).booked_tokens == 10240 + 2 * 512);
  // 150 ms after the third, the replica counts 2 requests (2/16): of its
  // three bookings, all older than the 100 ms grace, the oldest is not there.
  // It leaves r's queue (displaced, not ended) ...
  h.clock.wall += 150'000;
  h.ingest(stats_at(r, h.clock.wall, 2.0f / 16));
  WorkRow w = work_row(h, r);
  CHECK(w.open_bookings == 2);
  CHECK(w.booked_tokens == 2 * 512);
  CHECK(w.bookings_expired == 0);
  // ... until q, booked nothing, counts 1 request: it takes it, tokens and blocks.
  CHECK(work_row(h, q).open_bookings == 0);
  h.ingest(stats_at(q, h.clock.wall, 1.0f / 16));
  CHECK(work_row(h, q).open_bookings == 1);
  CHECK(work_row(h, q).booked_tokens == 10240);
  // A fourth turn follows the two left on r (r's queue has drained, q's holds
  // 10240 tokens); 50 ms later (inside the grace) r counts 1 request: of the
  // two bookings older than the grace one is there, the older is displaced;
  // the fourth, too young to be counted, stays. No replica counts unbooked
  // requests now: it waits for one.
  h.clock.wall += 50'000;
  auto fourth = first;
  fourth.push_back(8002);
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", fourth, kBlock))) == named("PREFIX_MATCH", r));
  h.clock.wall += 50'000;
  h.ingest(stats_at(r, h.clock.wall, 1.0f / 16));
  w = work_row(h, r);
  CHECK(w.open_bookings == 2);
  CHECK(w.booked_tokens == 2 * 512);
  // A count at least the bookings' moves nothing; nor does a clamped 1.0.
  h.clock.wall += 200'000;
  h.ingest(stats_at(r, h.clock.wall, 2.0f / 16));
  h.ingest(stats_at(r, h.clock.wall, 1.0f));
  CHECK(work_row(h, r).open_bookings == 2);
  // The one q took completes on q's report; the displaced one ends when a
  // replica reports its blocks stored.
  h.ingest(chain_update("t", "m", "vllm", q, h.clock.wall, first, 0, "", kBlock));
  CHECK(work_row(h, q).open_bookings == 0);
  CHECK(work_row(h, q).bookings_completed == 1);
  auto second = first;
  second.push_back(8000);
  h.ingest(
      chain_update("t", "m", "vllm", "r7" == r ? "r6" : "r7", h.clock.wall, second, 0, "", kBlock));
  CHECK(work_row(h, r).bookings_expired == 1);
  CHECK(work_row(h, r).open_bookings == 2);
}

TEST_CASE(
    "work-aware: requests a replica counts beyond its bookings are an average booking's work "
    "each") {
  Harness h = work_harness();
  eight_replicas(h);
  for (const char* name : {"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"}) {
    for (const float p : {1.0f / 16, 2.0f / 16, 3.0f / 16, 1.0f / 16})
      h.ingest(stats_at(name, kNow, p));
  }
  // One booking of 10240 tokens on r: the scope's mean booking is 10240 tokens.
  const std::string r = replica_of(h.lookup(chain_req("t", "m", "vllm", blocks(7000, 20), kBlock)));
  const std::string p = r == "r2" ? "r3" : "r2";
  auto queued = [&](const std::string& replica) {
    std::int64_t us = -1;
    h.shard->queued_work("t", "m", "vllm", h.clock.wall, [&](std::string_view id, std::int64_t q) {
      if (id == replica) us = q;
    });
    return us;
  };
  // 200 ms later p, booked nothing, counts 2 requests and no booking is
  // displaced: its queue is at least 2 × 10240 tokens at 10,000 tokens/s.
  h.clock.wall += 200'000;
  h.ingest(stats_at(p, h.clock.wall, 2.0f / 16));
  CHECK(queued(p) == 2'048'000);
  CHECK(work_row(h, p).open_bookings == 0);
  // A miss of 2 blocks goes anywhere but p (or r, 824 ms queued).
  const std::string miss =
      replica_of(h.lookup(chain_req("t", "m", "vllm", blocks(9000, 2), kBlock)));
  CHECK(miss != p);
  CHECK(miss != r);
  // Pressure 0: nothing running or waiting there, the floor goes.
  h.clock.wall += 48'000;
  h.ingest(stats_at(p, h.clock.wall, 0.0f));
  CHECK(queued(p) == 0);
}

TEST_CASE(
    "work-aware: a pressure that is no request count (no common step) never ends bookings but 0") {
  Harness h = work_harness();
  eight_replicas(h);
  const std::string r = replica_of(h.lookup(chain_req("t", "m", "vllm", blocks(7000, 20), kBlock)));
  // Readings with no common step above 1/65536: a load fraction, not a count.
  h.clock.wall += 200'000;
  for (const float p : {0.0123457f, 0.333333f, 0.0777777f, 0.5123f, 0.0123457f})
    h.ingest(stats_at(r, h.clock.wall, p));
  CHECK(work_row(h, r).open_bookings == 1);
  // Only three changed readings: not yet a count either, on another replica.
  auto second = blocks(9000, 20);
  const std::string q = replica_of(h.lookup(chain_req("t", "m", "vllm", second, kBlock)));
  REQUIRE(q != r);
  h.clock.wall += 200'000;
  for (const float p : {0.25f, 0.5f, 0.25f}) h.ingest(stats_at(q, h.clock.wall, p));
  CHECK(work_row(h, q).open_bookings == 1);
  // Pressure 0 still ends it.
  h.ingest(stats_at(r, h.clock.wall, 0.0f));
  CHECK(work_row(h, r).open_bookings == 0);
}

TEST_CASE("work-aware: one known replica → misses get NO_HINT; a second one → AFFINITY_HINT") {
  Harness h = work_harness();
  h.ingest(chain_update("t", "m", "vllm", "r0", kNow, {1, 2}, 0, "", kBlock));
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", {42, 43}, kBlock))) == "NO_HINT");
  CHECK(work_row(h, "r0").hints == 0);  // nothing booked
  // A hit is still a hit.
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", {1, 2, 3}, kBlock))) == "PREFIX_MATCH r0");
  // A second replica known from its stats alone: misses are answered again.
  h.ingest(idle_stats("r1", kNow));
  const auto miss = h.lookup(chain_req("t", "m", "vllm", {42, 43}, kBlock));
  CHECK(miss.reason_code() == "AFFINITY_HINT");
  // r0 has 512 tokens booked by the hit above: the idle r1 is the answer.
  CHECK(top(miss) == "AFFINITY_HINT r1");
}

TEST_CASE("work-aware: replicas of two speeds get misses in proportion to their learned rates") {
  Harness h = work_harness();
  h.ingest(chain_update("t", "m", "vllm", "fast", kNow, {100}, 0, "", kBlock));
  h.ingest(chain_update("t", "m", "vllm", "slow", kNow, {101}, 0, "", kBlock));
  h.ingest(idle_stats("fast", kNow));
  h.ingest(idle_stats("slow", kNow));
  // Each holds the first block of one prompt of 11 blocks: booked there
  // (5120 tokens), reported after 0.5 s (fast) and 1 s (slow).
  auto prompt = [](std::uint64_t first) {
    auto chain = blocks(first * 100, 10);
    chain.insert(chain.begin(), first);
    return chain;
  };
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", prompt(100), kBlock))) == "PREFIX_MATCH fast");
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", prompt(101), kBlock))) == "PREFIX_MATCH slow");
  h.clock.wall += 500'000;
  h.ingest(chain_update("t", "m", "vllm", "fast", h.clock.wall, prompt(100), 0, "", kBlock));
  h.clock.wall += 500'000;
  h.ingest(chain_update("t", "m", "vllm", "slow", h.clock.wall, prompt(101), 0, "", kBlock));
  CHECK(work_row(h, "fast").prefill_tokens_per_s == doctest::Approx(10240.0));
  CHECK(work_row(h, "slow").prefill_tokens_per_s == doctest::Approx(5120.0));
  // 12 simultaneous misses of 1024 tokens: 100 ms each on fast, 200 ms on slow.
  std::map<std::string, int> per;
  for (std::uint64_t i = 0; i < 12; ++i)
    ++per[replica_of(h.lookup(chain_req("t", "m", "vllm", blocks(50000 + 10 * i, 2), kBlock)))];
  CHECK(per == std::map<std::string, int>{{"fast", 8}, {"slow", 4}});
}

TEST_CASE("work-aware: a replica not timed yet is priced at the scope's mean learned rate") {
  Harness h = work_harness();
  for (const char* r : {"a", "b", "new"}) h.ingest(idle_stats(r, kNow));
  h.ingest(chain_update("t", "m", "vllm", "a", kNow, {100}, 0, "", kBlock));
  h.ingest(chain_update("t", "m", "vllm", "b", kNow, {101}, 0, "", kBlock));
  // a and b each prefill a prompt of 11 blocks holding its first: 5120 tokens
  // booked, reported after 125 ms: 40,960 tokens/s, four times the flag's
  // 10,000 (a replay at trace time / 4 runs its replicas that much faster).
  auto prompt = [](std::uint64_t first) {
    auto chain = blocks(first * 100, 10);
    chain.insert(chain.begin(), first);
    return chain;
  };
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", prompt(100), kBlock))) == "PREFIX_MATCH a");
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", prompt(101), kBlock))) == "PREFIX_MATCH b");
  h.clock.wall += 125'000;
  h.ingest(chain_update("t", "m", "vllm", "a", h.clock.wall, prompt(100), 0, "", kBlock));
  h.ingest(chain_update("t", "m", "vllm", "b", h.clock.wall, prompt(101), 0, "", kBlock));
  CHECK(work_row(h, "a").prefill_tokens_per_s == doctest::Approx(40960.0));
  CHECK(work_row(h, "b").prefill_tokens_per_s == doctest::Approx(40960.0));
  // Six misses of 1024 tokens: 25 ms on each of the three. Priced at the
  // flag's rate, `new` would wait 102.4 ms and get none of them.
  std::map<std::string, int> per;
  for (std::uint64_t i = 0; i < 6; ++i)
    ++per[replica_of(h.lookup(chain_req("t", "m", "vllm", blocks(50000 + 10 * i, 2), kBlock)))];
  CHECK(per == std::map<std::string, int>{{"a", 2}, {"b", 2}, {"new", 2}});
}

TEST_CASE(
    "work-aware without replica stats: NO_HINT probes when an idle replica never seen would serve "
    "as soon: the first, then 2 per replica found, else one per discovery window") {
  Harness h = work_harness();
  eight_replicas(h, false);
  Misses misses{h};
  const auto miss = [&] { return top(misses.lookup()); };
  // The scope knows r0..r7 only by their entries, all idle: a replica it has
  // never seen, if idle, would serve a miss as soon. The first such miss is a
  // probe (the gateway balances).
  CHECK(miss() == "NO_HINT");
  // The replicas known before the first probe earn no more probes: the next
  // eight misses go to the eight idle replicas, one each, and once every one
  // is busy a miss is still a hint (the discovery window, the first booking
  // bound of 10 s, has not passed since the probe).
  std::map<std::string, int> per;
  for (int i = 0; i < 8; ++i) {
    const std::string answer = miss();
    CHECK(answer.rfind("AFFINITY_HINT ", 0) == 0);
    ++per[answer];
  }
  CHECK(per.size() == 8);
  CHECK(miss() == "AFFINITY_HINT r6");
  // A ninth replica reports entries (a probe found it): it earns two probes.
  // An idle r8 serves a miss no sooner than an unseen idle replica would, so
  // both go to the gateway; the budget spent, the next miss goes to r8.
  h.ingest(chain_update("t", "m", "vllm", "r8", h.clock.wall, {108}, 0, "", kBlock));
  CHECK(miss() == "NO_HINT");
  CHECK(miss() == "NO_HINT");
  CHECK(miss() == "AFFINITY_HINT r8");
  CHECK(miss() == "AFFINITY_HINT r0");
  // 10 s after the last probe, the next miss that an unseen replica would
  // serve as soon probes again.
  h.clock.wall += 10'000'000;
  CHECK(miss() == "NO_HINT");
  CHECK(miss() == "AFFINITY_HINT r8");
}

TEST_CASE(
    "work-aware without replica stats: the probes earned are at most the replicas known, and a "
    "replica that drops out and returns earns as a new one") {
  Harness h = work_harness();
  h.ingest(chain_update("t", "m", "vllm", "r0", kNow, {100}, 0, "", kBlock));
  h.ingest(chain_update("t", "m", "vllm", "r1", kNow, {101}, 0, "", kBlock));
  Misses misses{h};
  const auto miss = [&] { return misses.reason(); };
  CHECK(miss() == "NO_HINT");  // the first probe, with 2 known
  // Six replicas found at once: 12 probes earned, capped at the 8 known.
  for (std::uint64_t i = 2; i < 8; ++i)
    h.ingest(
        chain_update("t", "m", "vllm", "r" + std::to_string(i), kNow, {100 + i}, 0, "", kBlock));
  std::vector<std::string> reasons;
  for (int i = 0; i < 10; ++i) reasons.push_back(miss());
  CHECK(reasons == std::vector<std::string>{"NO_HINT", "NO_HINT", "NO_HINT", "NO_HINT", "NO_HINT",
                                            "NO_HINT", "NO_HINT", "NO_HINT", "AFFINITY_HINT",
                                            "AFFINITY_HINT"});
  // r7's entries cleared (it had no booking): 7 known, nothing earned. Its
  // entries reported again: it earns two probes as a new replica would.
  h.event(pb::CacheEvent::ALL_CLEARED, "t", "m", "r7");
  h.clock.wall += 1'000'000;  // every queue drained
  CHECK(miss() == "AFFINITY_HINT");
  h.ingest(chain_update("t", "m", "vllm", "r7", h.clock.wall, {107}, 0, "", kBlock));
  h.clock.wall += 1'000'000;
  CHECK(miss() == "NO_HINT");
  CHECK(miss() == "NO_HINT");
  CHECK(miss() == "AFFINITY_HINT");
}

TEST_CASE(
    "work-aware without replica stats: earned probes are kept until spent, whenever that is") {
  Harness h = work_harness();
  h.ingest(chain_update("t", "m", "vllm", "r0", kNow, {100}, 0, "", kBlock));
  h.ingest(chain_update("t", "m", "vllm", "r1", kNow, {101}, 0, "", kBlock));
  Misses misses{h};
  const auto miss = [&] { return misses.reason(); };
  CHECK(miss() == "NO_HINT");  // the first probe
  // r2 and r3 found: four probes earned (the budget is at most the 4 known),
  // one spent.
  h.ingest(chain_update("t", "m", "vllm", "r2", kNow, {102}, 0, "", kBlock));
  h.ingest(chain_update("t", "m", "vllm", "r3", kNow, {103}, 0, "", kBlock));
  CHECK(miss() == "NO_HINT");
  // 20 s later (past the 10 s window) the three left are spent first; the
  // window's probe is then not due (the last probe was just now).
  h.clock.wall += 20'000'000;
  refresh(h, 4);
  CHECK(miss() == "NO_HINT");
  CHECK(miss() == "NO_HINT");
  CHECK(miss() == "NO_HINT");
  CHECK(miss() == "AFFINITY_HINT");
}

TEST_CASE(
    "work-aware without replica stats and without affinityRouting: holders' counts earn no "
    "probes") {
  Harness h = work_harness();
  h.policy(R"({"version":7,"policies":[{"namespace":"t","affinityRouting":false}]})");
  // Prefix {1, 2} is held by r0 alone, {10, 11} by r0, r1 and r2: the
  // candidates of a request are its prefix's holders, 1 or 3.
  h.ingest(chain_update("t", "m", "vllm", "r0", kNow, {1, 2}, 0, "", kBlock));
  for (const char* r : {"r0", "r1", "r2"})
    h.ingest(chain_update("t", "m", "vllm", r, kNow, {10, 11}, 0, "", kBlock));
  // 20 new blocks after each prefix (1,024 ms) make every holder busy: r0
  // by the first, r1 and r2 (idle holders first) by the next two.
  std::vector<std::string> loads;
  for (const std::uint64_t first : {1, 10, 10}) {
    std::vector<std::uint64_t> chain = {first, first + 1};
    for (std::uint64_t b = 0; b < 20; ++b) chain.push_back(5000 + 100 * loads.size() + b);
    loads.push_back(top(h.lookup(chain_req("t", "m", "vllm", chain, kBlock))).substr(0, 12));
  }
  CHECK(loads == std::vector<std::string>(3, "PREFIX_MATCH"));
  // Every holder's queue is now longer than the prefill its cache saves: the
  // first such request is the scope's probe; then, alternating between the
  // prefixes (1 and 3 candidates), no count is a replica found: hints until
  // the window (10 s) passes.
  std::vector<std::string> reasons;
  for (std::uint64_t i = 0; i < 8; ++i) {
    const std::uint64_t first = i % 2 == 0 ? 1 : 10;
    reasons.push_back(
        h.lookup(chain_req("t", "m", "vllm", {first, first + 1, 9000 + i}, kBlock)).reason_code());
  }
  CHECK(reasons == std::vector<std::string>{"NO_HINT", "PREFIX_MATCH", "PREFIX_MATCH",
                                            "PREFIX_MATCH", "PREFIX_MATCH", "PREFIX_MATCH",
                                            "PREFIX_MATCH", "PREFIX_MATCH"});
}

TEST_CASE(
    "work-aware without replica stats: a hit probes only when its holder's queue is longer than "
    "the prefill its cache saves") {
  Harness h = wait_harness();
  h.ingest(chain_update("t", "m", "vllm", "r0", kNow, {1, 2}, 0, "", kBlock));
  h.ingest(chain_update("t", "m", "vllm", "r1", kNow, {100}, 0, "", kBlock));
  // The first probe: a miss, both replicas idle.
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", {50, 51}, kBlock))) == "NO_HINT");
  // r2 found: two probes earned.
  h.ingest(chain_update("t", "m", "vllm", "r2", kNow, {101}, 0, "", kBlock));
  // The idle holder r0 serves {1, 2} + 20 blocks sooner than any idle replica
  // (20 blocks of prefill against 22): PREFIX_MATCH, and its 20 blocks
  // (1,024 ms) are booked on r0.
  std::vector<std::uint64_t> long_prompt = {1, 2};
  for (std::uint64_t b = 200; b < 220; ++b) long_prompt.push_back(b);
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", long_prompt, kBlock))) == "PREFIX_MATCH r0");
  // {1, 2, 300} on r0 waits 1,024 + 51.2 ms, more than its whole prefill on an
  // idle replica (153.6 ms): the cheapest known replica is an idle non-holder
  // (r1 or r2), as soon as an unseen idle one: a probe from the budget.
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", {1, 2, 300}, kBlock))) == "NO_HINT");
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", {1, 2, 301}, kBlock))) == "NO_HINT");
  // The budget spent: a hint to the idle non-holder first in the rendezvous
  // order of the prompt (r1 and r2 cost the same).
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", {1, 2, 302}, kBlock))) == "AFFINITY_HINT r1");
}

TEST_CASE(
    "work-aware without replica stats: each probe that found no new replica doubles the discovery "
    "window, up to 5 minutes; a new replica resets it") {
  Harness h = work_harness();
  eight_replicas(h, false);
  Misses misses{h};
  const auto miss = [&] { return misses.reason(); };
  std::uint64_t known = 8;
  // At h.clock.wall + `after` µs, the known replicas' entries refreshed (they
  // stay known) and every queue drained: the reason of one miss.
  const auto miss_after = [&](std::int64_t after) {
    h.clock.wall += after;
    refresh(h, known);
    return miss();
  };
  // The scope's first probe.
  CHECK(miss_after(0) == "NO_HINT");
  CHECK(miss() == "AFFINITY_HINT");
  // No completion is timed: the window is the first booking bound, 10 s. The
  // probe 10 s later is the first after a window without a new replica; each
  // such probe doubles the window: 20 s, 40 s, ... 5 minutes at most.
  CHECK(miss_after(10'000'000) == "NO_HINT");
  std::int64_t window = 20'000'000;
  for (int round = 0; round < 6; ++round) {
    CAPTURE(window);
    CHECK(miss_after(window - 1) == "AFFINITY_HINT");
    h.clock.wall += 1;
    CHECK(miss() == "NO_HINT");
    window = std::min<std::int64_t>(2 * window, 300'000'000);
  }
  // A ninth replica reports entries: two probes earned and the window is 10 s
  // again.
  h.ingest(chain_update("t", "m", "vllm", "r8", h.clock.wall, {108}, 0, "", kBlock));
  known = 9;
  CHECK(miss() == "NO_HINT");
  CHECK(miss() == "NO_HINT");
  CHECK(miss() == "AFFINITY_HINT");
  CHECK(miss_after(10'000'000 - 1) == "AFFINITY_HINT");
  h.clock.wall += 1;
  CHECK(miss() == "NO_HINT");
  // That probe found nothing: the window doubles again.
  CHECK(miss_after(20'000'000 - 1) == "AFFINITY_HINT");
  h.clock.wall += 1;
  CHECK(miss() == "NO_HINT");
}

TEST_CASE(
    "work-aware: 300 misses in one scope keep the 256 newest bookings, each still found by its "
    "prompt") {
  // The scope's bookings are indexed by their first block (bookings.cc): the
  // index grows with the slots, a full scope ends its oldest booking and
  // reuses its slot. A booked prompt asked again is its booked replica's
  // PREFIX_MATCH (all its tokens held, nothing more booked); an ended one is a
  // miss again.
  Harness h = work_harness();
  eight_replicas(h);
  auto prompt = [](std::uint64_t i) { return blocks(100'000 + 1000 * i, 2); };  // 1024 tokens
  std::vector<std::string> booked_on;
  for (std::uint64_t i = 0; i < 300; ++i) {
    const auto r = h.lookup(chain_req("t", "m", "vllm", prompt(i), kBlock));
    CHECK(r.reason_code() == "AFFINITY_HINT");
    booked_on.push_back(replica_of(r));
  }
  auto totals = [&] {
    std::pair<std::int64_t, std::int64_t> open_expired{0, 0};
    for (const WorkRow& w : h.shard->collect_snapshot().work) {
      open_expired.first += w.open_bookings;
      open_expired.second += w.bookings_expired;
    }
    return open_expired;
  };
  CHECK(totals() == std::pair<std::int64_t, std::int64_t>{256, 44});
  // 5 s later every queue has drained (38 bookings of 102.4 ms at most) and
  // no booking reached its bound (10 s): a booked prompt waits nothing on its
  // booked replica, 102.4 ms anywhere else.
  h.clock.wall += 5'000'000;
  for (const std::uint64_t i : {44, 45, 100, 200, 299}) {
    const auto r = h.lookup(chain_req("t", "m", "vllm", prompt(i), kBlock));
    CHECK(top(r) == named("PREFIX_MATCH", booked_on[i]));
    CHECK(r.replica_scores(0).matched_tokens() == 2 * kBlock);
  }
  CHECK(totals() == std::pair<std::int64_t, std::int64_t>{256, 44});
  // The oldest 44 were ended to make room: prompt 0 is a miss again, booked anew
  // (ending the oldest live one, prompt 44's).
  CHECK(h.lookup(chain_req("t", "m", "vllm", prompt(0), kBlock)).reason_code() == "AFFINITY_HINT");
  CHECK(totals() == std::pair<std::int64_t, std::int64_t>{256, 45});
  CHECK(h.lookup(chain_req("t", "m", "vllm", prompt(44), kBlock)).reason_code() == "AFFINITY_HINT");
}

TEST_CASE("stats refused at the shard's bound: the replica's idle report still ends its bookings") {
  IndexConfig cfg;
  cfg.max_stats_entries = 1;  // a shard whose stats room other peers took
  Harness h(cfg, nullptr, ic::config::Ranking::kWorkAware);
  h.ingest(idle_stats("other-peer", kNow));
  eight_replicas(h, /*stats=*/false);
  const std::string r = replica_of(h.lookup(chain_req("t", "m", "vllm", blocks(7000, 20), kBlock)));
  REQUIRE(!r.empty());
  CHECK(work_row(h, r).open_bookings == 1);
  h.clock.wall += 500'000;  // past the report's grace
  h.ingest(idle_stats(r, h.clock.wall));
  CHECK(h.shard->stats_refused() == 1);
  CHECK(h.shard->stats_entry_count() == 1);
  CHECK(work_row(h, r).open_bookings == 0);
  CHECK(work_row(h, r).bookings_expired == 1);
}
