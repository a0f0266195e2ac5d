// The gateway's feedback to the work-aware ranking (docs/ranking.md
// "Feedback", index/feedback.cc): the served replica moves a booking, the
// first byte ends its prefill work and teaches the replica's rate, the end
// releases what is left; the queued work the endpoint picker sheds by. Exact
// answers; the clock is the harness's ManualClock and the prefill rate before
// one is learned the flag's default, 10,000 tokens/s (512 tokens = 51.2 ms).

#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "helpers.hh"

using namespace ic::index;
using namespace ic::index::test;

namespace {

constexpr std::int32_t kBlock = 512;  // tokens per block in these inputs
using Kind = BookingFeedback::Kind;

// Eight replicas r0..r7 of the scope (t, m, vllm), each holding one unrelated
// block and idle stats. The pick minimizes the estimated wait itself
// (--uncached-weight 1): the scenarios below are written in waits.
Harness eight_replicas() {
  IndexConfig cfg;
  cfg.work_aware.uncached_weight = 1.0;
  Harness h(cfg, nullptr, ic::config::Ranking::kWorkAware);
  const char* names[] = {"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"};
  for (std::uint64_t i = 0; i < 8; ++i) {
    h.ingest(chain_update("t", "m", "vllm", names[i], kNow, {100 + i}, 0, "", kBlock));
    pb::CacheStateUpdate stats = scoped_update("t", "m", "vllm", names[i], kNow);
    stats.mutable_stats()->set_pressure(0.0f);
    h.ingest(stats);
  }
  return h;
}

std::vector<std::uint64_t> blocks(std::uint64_t first, std::size_t n) {
  std::vector<std::uint64_t> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back(first + i);
  return v;
}

WorkRow work_row(Harness& h, const std::string& replica) {
  for (const WorkRow& w : h.shard->collect_snapshot().work) {
    if (w.replica_id == replica) return w;
  }
  return WorkRow{};
}

std::string top(const pb::LookupRouteResponse& r) {
  if (r.replica_scores_size() == 0) return r.reason_code();
  return r.reason_code() + " " + r.replica_scores(0).replica_id();
}

void tell(Harness& h, Kind kind, BookingRef ref, std::string_view replica = {},
          std::int64_t held = 0) {
  BookingFeedback f;
  f.kind = kind;
  f.booking = ref;
  f.replica_id = replica;
  f.held_tokens = held;
  h.shard->feedback(f, h.clock.wall);
}

std::map<std::string, std::int64_t> queued(Harness& h) {
  std::map<std::string, std::int64_t> out;
  h.shard->queued_work("t", "m", "vllm", h.clock.wall,
                       [&out](std::string_view r, std::int64_t us) { out[std::string(r)] = us; });
  return out;
}

}  // namespace

TEST_CASE("feedback: the lookup names its booking; a fully held prompt books nothing") {
  Harness h = eight_replicas();
  const auto chain = blocks(7000, 2);  // 1024 tokens
  const auto first = h.lookup(chain_req("t", "m", "vllm", chain, kBlock));
  REQUIRE(first.reason_code() == "AFFINITY_HINT");
  const BookingRef ref = h.shard->last_booking();
  CHECK(ref.valid());
  // The same prompt again is held through that booking: nothing new to book.
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", chain, kBlock))) ==
        "PREFIX_MATCH " + first.replica_scores(0).replica_id());
  CHECK_FALSE(h.shard->last_booking().valid());
  // A second booking has another seq.
  h.lookup(chain_req("t", "m", "vllm", blocks(8000, 1), kBlock));
  CHECK(h.shard->last_booking().valid());
  CHECK(h.shard->last_booking().seq == ref.seq + 1);
}

TEST_CASE("feedback: the first byte ends the prefill work and teaches the rate") {
  Harness h = eight_replicas();
  const auto chain = blocks(7000, 2);  // 1024 tokens, 102.4 ms at the default rate
  const std::string r =
      h.lookup(chain_req("t", "m", "vllm", chain, kBlock)).replica_scores(0).replica_id();
  const BookingRef ref = h.shard->last_booking();
  CHECK(queued(h)[r] == 102'400);
  // The first byte 200 ms later: 1024 tokens in 0.2 s.
  h.clock.wall += 200'000;
  tell(h, Kind::kFirstByte, ref);
  WorkRow w = work_row(h, r);
  CHECK(w.open_bookings == 1);  // its blocks stay speculative entries
  CHECK(w.booked_tokens == 0);
  CHECK(w.prefill_tokens_per_s == doctest::Approx(5120.0));
  CHECK(queued(h)[r] == 0);
  // A second first byte of the same booking teaches nothing more.
  h.clock.wall += 100'000;
  tell(h, Kind::kFirstByte, ref);
  CHECK(work_row(h, r).prefill_tokens_per_s == doctest::Approx(5120.0));
  // The end after a first byte releases nothing: the next turn still follows
  // the booked blocks before the engine's report arrives.
  tell(h, Kind::kEnded, ref);
  CHECK(work_row(h, r).open_bookings == 1);
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", blocks(7000, 3), kBlock))) == "PREFIX_MATCH " + r);
  // The engine's report completes the first booking; the rate learned no second time from it.
  h.ingest(chain_update("t", "m", "vllm", r, h.clock.wall, chain, 0, "", kBlock));
  w = work_row(h, r);
  CHECK(w.bookings_completed == 1);
  CHECK(w.prefill_tokens_per_s == doctest::Approx(5120.0));
}

TEST_CASE("feedback: a prefill starts after the replica's previous one ended") {
  Harness h = eight_replicas();
  const std::string r =
      h.lookup(chain_req("t", "m", "vllm", blocks(7000, 2), kBlock)).replica_scores(0).replica_id();
  const BookingRef a = h.shard->last_booking();
  // 1 ms later the next turn (4 blocks) follows the booking to r (101.4 +
  // 102.4 ms there, 204.8 on an idle replica) and books its 1024 new tokens.
  h.clock.wall += 1'000;
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", blocks(7000, 4), kBlock))) == "PREFIX_MATCH " + r);
  const BookingRef b = h.shard->last_booking();
  CHECK(work_row(h, r).booked_tokens == 2048);
  // A's first byte at 100 ms (10,240 tokens/s), B's at 300 ms: B's prefill
  // ran from 100 ms, 1024 tokens in 200 ms. Decayed sums (15/16):
  // (1024 × 15/16 + 1024) / (100 ms × 15/16 + 200 ms) = 1984 / 0.29375 s.
  h.clock.wall += 99'000;
  tell(h, Kind::kFirstByte, a);
  CHECK(work_row(h, r).prefill_tokens_per_s == doctest::Approx(10240.0));
  // B is still queued: 1024 tokens at the new rate, 100 ms.
  CHECK(queued(h)[r] == 100'000);
  h.clock.wall += 200'000;
  tell(h, Kind::kFirstByte, b);
  CHECK(work_row(h, r).prefill_tokens_per_s == doctest::Approx(1984.0 / 0.29375));
  CHECK(work_row(h, r).booked_tokens == 0);
}

TEST_CASE("feedback: a request served elsewhere moves its booking and its blocks") {
  Harness h = eight_replicas();
  const auto chain = blocks(7000, 4);  // 2048 tokens
  const std::string r =
      h.lookup(chain_req("t", "m", "vllm", chain, kBlock)).replica_scores(0).replica_id();
  const BookingRef ref = h.shard->last_booking();
  const std::string other = r == "r0" ? "r1" : "r0";
  // `other` served it, holding 512 of its tokens: 1536 are booked there.
  tell(h, Kind::kServedBy, ref, other, 512);
  WorkRow w = work_row(h, r);
  CHECK(w.open_bookings == 0);
  CHECK(w.booked_tokens == 0);
  CHECK(queued(h)[r] == 0);
  w = work_row(h, other);
  CHECK(w.open_bookings == 1);
  CHECK(w.booked_tokens == 1536);
  CHECK(queued(h)[other] == 153'600);
  // The next turn follows the blocks to where they are being computed.
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", blocks(7000, 5), kBlock))) ==
        "PREFIX_MATCH " + other);
  // The same replica again changes nothing; an endpoint the scope never knew
  // gets a work record of its own (the booking's whole prompt).
  tell(h, Kind::kServedBy, ref, other, 0);
  CHECK(work_row(h, other).booked_tokens == 1536 + 512);  // + the next turn's booking
  tell(h, Kind::kServedBy, ref, "10.0.0.9:8000", 0);
  CHECK(work_row(h, "10.0.0.9:8000").booked_tokens == 2048);
  CHECK(work_row(h, other).booked_tokens == 512);
}

TEST_CASE("feedback: a request that ends before its first byte releases its booking") {
  Harness h = eight_replicas();
  const auto chain = blocks(7000, 2);
  const std::string r =
      h.lookup(chain_req("t", "m", "vllm", chain, kBlock)).replica_scores(0).replica_id();
  const BookingRef ref = h.shard->last_booking();
  h.clock.wall += 50'000;
  tell(h, Kind::kEnded, ref);
  const WorkRow w = work_row(h, r);
  CHECK(w.open_bookings == 0);
  CHECK(w.booked_tokens == 0);
  CHECK(w.bookings_expired == 1);
  CHECK(w.prefill_tokens_per_s == 0);  // nothing learned
  CHECK(queued(h)[r] == 0);
  // Its blocks are no entries any more: the prompt is a miss again.
  CHECK(h.lookup(chain_req("t", "m", "vllm", chain, kBlock)).reason_code() == "AFFINITY_HINT");
  // Feedback on an ended booking, or on none, is ignored.
  tell(h, Kind::kFirstByte, ref);
  tell(h, Kind::kServedBy, BookingRef{}, "r3", 0);
  CHECK(work_row(h, r).prefill_tokens_per_s == 0);
}

TEST_CASE("feedback: queued work of an unknown scope visits nothing") {
  Harness h = eight_replicas();
  int visits = 0;
  h.shard->queued_work("t", "m", "sglang", h.clock.wall,
                       [&visits](std::string_view, std::int64_t) { ++visits; });
  h.shard->queued_work("nobody", "m", "vllm", h.clock.wall,
                       [&visits](std::string_view, std::int64_t) { ++visits; });
  CHECK(visits == 0);
}

TEST_CASE("feedback: a displaced booking moves onto the served replica, or ends with the request") {
  Harness h = eight_replicas();
  auto stats_at = [&h](const std::string& replica, float pressure) {
    pb::CacheStateUpdate u = scoped_update("t", "m", "vllm", replica, h.clock.wall);
    u.mutable_stats()->set_pressure(pressure);
    h.ingest(u);
  };
  // Three bookings on r, 50 ms apart: 1024 tokens, then two turns of 512
  // more that follow its booked blocks.
  const std::string r =
      h.lookup(chain_req("t", "m", "vllm", blocks(7000, 2), kBlock)).replica_scores(0).replica_id();
  const BookingRef first = h.shard->last_booking();
  h.clock.wall += 50'000;
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", blocks(7000, 3), kBlock))) == "PREFIX_MATCH " + r);
  const BookingRef second = h.shard->last_booking();
  h.clock.wall += 50'000;
  CHECK(top(h.lookup(chain_req("t", "m", "vllm", blocks(7000, 4), kBlock))) == "PREFIX_MATCH " + r);
  CHECK(work_row(h, r).open_bookings == 3);
  // 200 ms later r's pressure counts requests (step 1/16 from its fourth
  // changed reading): 1, so the two oldest are displaced (off r's queue; no
  // replica counts unbooked requests to take them).
  h.clock.wall += 200'000;
  for (const float p : {1.0f / 16, 2.0f / 16, 3.0f / 16, 1.0f / 16}) stats_at(r, p);
  CHECK(work_row(h, r).open_bookings == 1);
  CHECK(work_row(h, r).booked_tokens == 512);
  // The gateway says the first was served by q: q books its 1024 tokens.
  const std::string q = r == "r0" ? "r1" : "r0";
  tell(h, Kind::kServedBy, first, q);
  CHECK(work_row(h, q).open_bookings == 1);
  CHECK(work_row(h, q).booked_tokens == 1024);
  CHECK(queued(h)[q] == 102'400);
  // The second ended before a first byte: it ends, no queue changes.
  tell(h, Kind::kEnded, second);
  CHECK(work_row(h, r).bookings_expired == 1);
  CHECK(work_row(h, r).open_bookings == 1);
  CHECK(work_row(h, q).open_bookings == 1);
}
