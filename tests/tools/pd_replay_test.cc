// The replay's P/D mode (tools/replay/pd_run.hh) on virtual time with the decode-first lane only,
// which asks no index: exact TTFT and time between tokens from hand-made requests.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "common/progress.hh"
#include "common/trace.hh"
#include "replay/pd_run.hh"
#include "shared_trace.hh"

using namespace ic::tools;
using namespace ic::tools::replay;
namespace v1 = inferencecache::v1alpha1;

namespace {

// The decode-first lane never calls the index: every call but the clock and finish fails.
class NoIndex final : public IndexClient {
 public:
  LookupCall lookup(const v1::LookupRouteRequest&, v1::LookupRouteResponse*) override {
    FAIL("the decode-first lane asked the index");
    return {false, "UNUSED", 0};
  }
  bool report(std::size_t, const v1::CacheStateUpdate&, std::string*) override {
    FAIL("the decode-first lane reported to the index");
    return false;
  }
  void publish(const v1::CacheEvent&) override { FAIL("the decode-first lane published"); }
  bool finish(std::string*) override { return true; }
  std::int64_t failed_events() const override { return 0; }
};

// One prefill and one decode replica on host 0, 1,000 tokens/s (1 token = 1 ms), a decode step
// of 10 ms + 10 ms per running decode (one decode: 20 ms, two: 30 ms).
PdOptions tiny_pd(int slots) {
  PdOptions o;
  o.prefill_replicas = 1;
  o.decode_replicas = 1;
  o.capacity_blocks = 100;
  o.prefill_rate = 1000;
  o.decode_slots = slots;
  o.step_ms = 10;
  o.step_per_seq_ms = 10;
  o.stats_interval_ms = 0;
  o.clock = Clock::kVirtual;
  o.clear_at_end = false;
  o.policies = {PdPolicy::kDecodeFirst};
  return o;
}

// #0 at 0 ms: 100 tokens, 10 out; #1 at 150 ms: 50 tokens, 4 out. Both are below the 2,048-token
// threshold: the decode replica prefills them itself (#0 0..100, #1 150..200).
std::vector<TraceRequest> two_local() {
  return {TraceRequest{0, 100, 10, {1}}, TraceRequest{150, 50, 4, {2}}};
}

PdPolicyResult run(const std::vector<TraceRequest>& trace, const PdOptions& options) {
  NoIndex client;
  ProgressBar progress(static_cast<std::int64_t>(trace.size()), false);
  PdResult result = run_pd_replay(trace, options, client, progress);
  REQUIRE(result.fatal_error.empty());
  REQUIRE(result.policies.size() == 1);
  return result.policies.front();
}

}  // namespace

TEST_CASE("P/D decode: every step is as slow as the decodes running during it") {
  const PdPolicyResult r = run(two_local(), tiny_pd(16));
  CHECK(r.decode_only == 2);
  CHECK(r.pairs == 0);
  // #0 decodes from 100 alone (20 ms steps): 2.5 tokens by 150, when #1's local prefill
  // (150..200) stops it until 200. #1 joins at 200: 30 ms steps for both; #1's 4
  // tokens are out at 320 (TTFT 200 + 30 − 150 = 80, TBT 120 / 4); #0 has 10 − 2.5 − 4 = 3.5
  // left, alone again: 320 + 70 = 390 (TTFT 120, TBT (390 − 100) / 10).
  CHECK(r.ttft_ms == std::vector<double>{120, 80});
  REQUIRE(r.tbt_ms.size() == 2);
  CHECK(r.tbt_ms[0] == doctest::Approx(30));
  CHECK(r.tbt_ms[1] == doctest::Approx(29));
}

TEST_CASE("P/D decode: a full replica's next decode waits for a slot") {
  const PdPolicyResult r = run(two_local(), tiny_pd(1));
  // #0: 2.5 tokens by 150, stopped by #1's local prefill until 200; 7.5 more at 20 ms: ends 350
  // (TBT 25). #1 waits for the slot from 200, decodes 350..430 alone (TTFT 350 + 20 − 150 = 220,
  // TBT 20).
  CHECK(r.ttft_ms == std::vector<double>{120, 220});
  REQUIRE(r.tbt_ms.size() == 2);
  CHECK(r.tbt_ms[0] == doctest::Approx(25));
  CHECK(r.tbt_ms[1] == doctest::Approx(20));
}

TEST_CASE("P/D pair: prefill, the KV transfer by distance, then decode") {
  // 2,048 uncached tokens reach the threshold: prefill on prefill-0 (0..2048), the KV moves to
  // decode-0 on the same host at 6 ms per 1,000 tokens (12.288 ms), one decode of 5 tokens at
  // 20 ms: TTFT 2048 + 12.288 + 20, TBT 20.
  const PdPolicyResult r = run({TraceRequest{0, 2048, 5, {10, 11, 12, 13}}}, tiny_pd(16));
  CHECK(r.pairs == 1);
  CHECK(r.decode_only == 0);
  REQUIRE(r.ttft_ms.size() == 1);
  CHECK(r.ttft_ms[0] == doctest::Approx(2080.288));
  REQUIRE(r.tbt_ms.size() == 1);
  CHECK(r.tbt_ms[0] == doctest::Approx(20));
}

TEST_CASE("P/D decode: a local prefill stops the replica's decodes for its whole length") {
  // #0 at 0: 100 tokens (local 0..100), 3 out, alone from 100 at 20 ms: 0.5 tokens by 110.
  // #1 at 110: 1,000 tokens (below the threshold: local 110..1110), 1 out. #0 makes no progress
  // until 1110, then shares 30 ms steps with #1: #0's first token is out at 1125 (TTFT 1125),
  // #1's at 1140 (TTFT 1030, TBT 30); #0 has 1.5 tokens left alone: 1170 (TBT (1170 − 100) / 3).
  const PdPolicyResult r =
      run({TraceRequest{0, 100, 3, {1}}, TraceRequest{110, 1000, 1, {2, 3}}}, tiny_pd(16));
  REQUIRE(r.ttft_ms.size() == 2);
  CHECK(r.ttft_ms[0] == doctest::Approx(1125));
  CHECK(r.ttft_ms[1] == doctest::Approx(1030));
  REQUIRE(r.tbt_ms.size() == 2);
  CHECK(r.tbt_ms[0] == doctest::Approx(30));
  CHECK(r.tbt_ms[1] == doctest::Approx(1070.0 / 3));
}

TEST_CASE("P/D decode: a decode that joins during a local prefill starts when it ends") {
  // #0 at 0: a pair (prefill 0..2048, KV on decode-0 at 2060.288), 1 out. #1 at 2000: 500
  // tokens, local 2000..2500, 1 out. #0 takes its slot at 2060.288 but its first step waits
  // for the engine; at 2500 #1 joins, and both tokens are out one 30 ms step later, at 2530:
  // TTFT 2530 and 530, TBT 469.712 and 30. #2 at 2600: 0 tokens out (a one-step decode, no TBT).
  const PdPolicyResult r = run({TraceRequest{0, 2048, 1, {10, 11, 12, 13}},
                                TraceRequest{2000, 500, 1, {20}}, TraceRequest{2600, 100, 0, {30}}},
                               tiny_pd(16));
  CHECK(r.pairs == 1);
  CHECK(r.decode_only == 2);
  REQUIRE(r.ttft_ms.size() == 3);
  CHECK(r.ttft_ms[0] == doctest::Approx(2530));
  CHECK(r.ttft_ms[1] == doctest::Approx(530));
  // #2: local 2600..2700, alone: 20 ms.
  CHECK(r.ttft_ms[2] == doctest::Approx(120));
  REQUIRE(r.tbt_ms.size() == 2);
  CHECK(r.tbt_ms[0] == doctest::Approx(469.712));
  CHECK(r.tbt_ms[1] == doctest::Approx(30));
}

TEST_CASE("P/D decode: Unix-millisecond timestamps give the same times and end") {
  // The conversation trace's first 300 requests, 1,700,000,000,123 ms later: at that magnitude
  // rounding leaves a decode a hair short of the token its end event was computed for, which
  // then was scheduled again at the same instant, forever (and the run never ended).
  PdOptions o = tiny_pd(16);
  o.prefill_replicas = 4;
  o.decode_replicas = 4;
  o.capacity_blocks = 2000;
  o.prefill_rate = 9000;
  o.step_ms = 20;
  o.step_per_seq_ms = 1;
  const std::vector<TraceRequest> trace = ic::tools::test::shared_trace_requests(300);
  std::vector<TraceRequest> shifted = trace;
  for (TraceRequest& t : shifted) t.timestamp_ms += 1'700'000'000'123;
  const PdPolicyResult a = run(trace, o);
  const PdPolicyResult b = run(shifted, o);
  REQUIRE(b.ttft_ms.size() == 300);
  REQUIRE(b.tbt_ms.size() == a.tbt_ms.size());
  const auto sum = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s;
  };
  CHECK(sum(b.ttft_ms) == doctest::Approx(sum(a.ttft_ms)).epsilon(1e-6));
  CHECK(sum(b.tbt_ms) == doctest::Approx(sum(a.tbt_ms)).epsilon(1e-6));
}
