// LookupPDRoute against LookupRoute for the same chain (issue 30 acceptance 3:
// LookupPDRoute's latency within 1.5× LookupRoute's). Both run through the
// service edge (protobuf in, protobuf out, as the server does) on the
// 1,000,000-entry index of perf/index_world.hh, whose probe chain (64 blocks
// of 16 tokens) is held at 8 depths by replica-0 … replica-7. The topology
// makes replica-0 … 3 the prefill pool and replica-4 … 7 the decode pool,
// each decode replica on a prefill replica's host. Both methods book work on
// every answer (the work-aware ranking's side effect); the clock stands
// still, so each scope sits at its 256-booking cap throughout, for both.
//
//   BM_LookupRoute        the work-aware LookupRoute of the chain
//   BM_LookupPDRoute      the pair (minUncachedTokens 0: always DISAGGREGATED)
//   BM_LookupPDRoute_DecodeOnly  the default threshold (2,048 tokens): the
//                         1,024-token prompt is short → DECODE_ONLY_SHORT
//   BM_LookupPDRoute_AllSlotsBooked  the pair with every decode slot booked
//                         (one slot each): the fallback passes
//
// Run: ninja -C <build> perf/pd_bench, then
//   <build>/perf/pd_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// The summary prints each LookupPDRoute median as a ratio to LookupRoute's.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "config/policy.hh"
#include "index_world.hh"
#include "sharding/pd_wire.hh"

namespace {

using namespace ic::perf;

// Eight replicas of the index world in two pools. "pair" and "local": decode
// slots never run out (256 bookings per scope at most). "full": one slot
// each, so once the scope holds bookings every decode replica's slots are
// booked and each choice is made again among the unsaturated ones
// (docs/pd-routing.md "Model" step 2), the slowest path of a pair.
// One topology over the index world's replicas: replica-0 … 3 prefill on
// hosts h0 … h3, replica-4 … 7 decode with `slots` each on the same hosts;
// `extra` adds fields (JSON members, each followed by a comma).
std::string topology(const std::string& name, const std::string& extra, int slots) {
  std::string t = R"({"name":")" + name + R"(","transport":"NIXL",)" + extra + R"("prefill":[)";
  for (int k = 0; k < 4; ++k) {
    t += (k > 0 ? "," : "") + std::string(R"({"replica":"replica-)") + std::to_string(k) +
         R"(","host":"h)" + std::to_string(k) + R"("})";
  }
  t += R"(],"decode":[)";
  for (int k = 0; k < 4; ++k) {
    t += (k > 0 ? "," : "") + std::string(R"({"replica":"replica-)") + std::to_string(4 + k) +
         R"(","host":"h)" + std::to_string(k) + R"(","slots":)" + std::to_string(slots) + "}";
  }
  return t + "]}";
}

std::string topologies() {
  const std::string pair = R"("disaggregation":{"minUncachedTokens":0},)";
  return R"({"version":7,"pdTopologies":[)" + topology("pair", pair, 65536) + "," +
         topology("local", "", 65536) + "," + topology("full", pair, 1) + "]}";
}

World& world() {
  static World w = [] {
    World made;
    made.shard->set_policies(ic::config::parse_policy_json(topologies()).set);
    return made;
  }();
  return w;
}

pb::LookupPDRouteRequest pd_request(const World& w, const std::string& ref) {
  const pb::LookupRouteRequest route = chain_request(w, 0);
  pb::LookupPDRouteRequest req;
  req.set_tenant_id(route.tenant_id());
  req.set_model_id(route.model_id());
  req.set_hash_scheme(route.hash_scheme());
  req.set_pd_topology_ref(ref);
  *req.mutable_block_hashes() = route.block_hashes();
  *req.mutable_block_token_counts() = route.block_token_counts();
  return req;
}

void BM_LookupRoute(benchmark::State& state) {
  World& w = world();
  const pb::LookupRouteRequest req = chain_request(w, 0);
  ic::index::LookupContext ctx;
  ctx.clock = &w.clock;
  pb::LookupRouteResponse out;
  for (auto _ : state) {
    ic::sharding::wire::lookup_route(*w.shard, req, ctx, &out);
    benchmark::DoNotOptimize(out);
  }
  if (out.reason_code() != "PREFIX_MATCH") state.SkipWithError(out.reason_code().c_str());
}
BENCHMARK(BM_LookupRoute);

void pd_lookup(benchmark::State& state, const std::string& ref, const std::string& want) {
  World& w = world();
  const pb::LookupPDRouteRequest req = pd_request(w, ref);
  ic::index::LookupContext ctx;
  ctx.clock = &w.clock;
  pb::LookupPDRouteResponse out;
  for (auto _ : state) {
    ic::sharding::wire::lookup_pd_route(*w.shard, req, ctx, &out);
    benchmark::DoNotOptimize(out);
  }
  if (out.reason_code() != want) state.SkipWithError(out.reason_code().c_str());
}
void BM_LookupPDRoute(benchmark::State& state) { pd_lookup(state, "pair", "DISAGGREGATED"); }
BENCHMARK(BM_LookupPDRoute);
void BM_LookupPDRoute_DecodeOnly(benchmark::State& state) {
  pd_lookup(state, "local", "DECODE_ONLY_SHORT");
}
BENCHMARK(BM_LookupPDRoute_DecodeOnly);
void BM_LookupPDRoute_AllSlotsBooked(benchmark::State& state) {
  pd_lookup(state, "full", "DISAGGREGATED");
}
BENCHMARK(BM_LookupPDRoute_AllSlotsBooked);

// The console table, then each LookupPDRoute median CPU time over LookupRoute's.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      // With --benchmark_report_aggregates_only only the aggregates arrive:
      // the median then replaces the repetitions it summarizes.
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median") continue;
      const std::string name = r.run_name.str();
      if (r.run_type == Run::RT_Aggregate) cpu_ns_[name].clear();
      cpu_ns_[name].push_back(r.GetAdjustedCPUTime());
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void print_ratios() const {
    const double route = median("BM_LookupRoute");
    std::printf("\nLookupPDRoute / LookupRoute, median CPU time per call (target <= 1.5):\n");
    for (const char* name :
         {"BM_LookupPDRoute", "BM_LookupPDRoute_DecodeOnly", "BM_LookupPDRoute_AllSlotsBooked"}) {
      const double pd = median(name);
      if (route > 0 && pd > 0)
        std::printf("  %-32s %7.0f ns / %7.0f ns = %.2fx\n", name, pd, route, pd / route);
    }
  }

 private:
  double median(const std::string& name) const {
    const auto it = cpu_ns_.find(name);
    if (it == cpu_ns_.end() || it->second.empty()) return 0;
    std::vector<double> v = it->second;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
  std::map<std::string, std::vector<double>> cpu_ns_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios();
  benchmark::Shutdown();
  return 0;
}
