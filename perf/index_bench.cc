// Index microbenchmarks (spec targets: chain lookup ≤ 2 µs on a 1,000,000-entry
// index, ingest ≥ 3,000,000 block entries/s on one core), and their floors: the
// same number of independent random probes (writes for ingest) into a table of
// the same size and record width, with no hashing, parsing or scoring, and
// the work floors (what the contract requires per block in the most
// favourable layout, perf/index_floors.hh). The summary after the table
// prints each operation as a ratio to its floor, and the work floors against
// the same floors (medians over the repetitions).
//
// Run: ninja -C <build> perf/index_bench, then
//   <build>/perf/index_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//   (the floor ratios alone:
//   --benchmark_filter='ChainLookup64x8(_Index)?(_Cold)?$|ExactLookup|Floor|Ingest16')
// Each lookup and ingest is measured twice: through the service edge (the
// protobuf messages translated per call, as the server does) and the index
// alone (its own value types, translated beforehand), which is the figure the
// floors describe.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "builders.hh"
#include "index/shard.hh"
#include "index_floors.hh"
#include "index_world.hh"
#include "sharding/index_wire.hh"

// GCC pairs the replaced operator delete's free() with `new` expressions it
// inlined and warns; the pair below is malloc/free on both sides.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

// Every operator new of the process, so the lookup benchmarks report heap
// allocations per call (the hot path's budget: none beyond the response).
namespace {
std::atomic<std::uint64_t> g_allocs{0};
}  // namespace
void* operator new(std::size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

using namespace ic::index;
using namespace ic::perf;
using namespace ic::perf::floors;
namespace pb = ::inferencecache::v1alpha1;

World& world() {
  static World w;
  return w;
}

World& small_world() {
  static World w(10'000, 1);
  return w;
}

// The answer to `req` (the checks after each lookup benchmark).
pb::LookupRouteResponse answer(World& w, const pb::LookupRouteRequest& req) {
  pb::LookupRouteResponse out;
  LookupContext ctx;
  ctx.clock = &w.clock;
  ic::sharding::wire::lookup_route(*w.shard, req, ctx, &out);
  return out;
}

// Runs `reqs` in turn (one request: cache-hot, as a repeated prompt; all probe
// chains: each call reads records the previous calls did not). `wire`: each
// call goes through the service edge (request views in, response message
// out), as LookupRoute does; else the index alone (Shard::lookup on the
// queries translated beforehand), the figure its floor compares with.
void run_lookups(benchmark::State& state, World& w, const std::vector<pb::LookupRouteRequest>& reqs,
                 bool wire) {
  pb::LookupRouteResponse out;
  LookupResult result;
  LookupContext ctx;
  ctx.clock = &w.clock;
  std::vector<std::vector<std::string_view>> hashes(reqs.size());
  std::vector<LookupQuery> queries;
  for (std::size_t r = 0; r < reqs.size(); ++r)
    queries.push_back(ic::sharding::wire::to_query(reqs[r], hashes[r]));
  std::size_t i = 0;
  const std::uint64_t allocs = g_allocs.load(std::memory_order_relaxed);
  for (auto _ : state) {
    if (wire) {
      ic::sharding::wire::lookup_route(*w.shard, reqs[i], ctx, &out);
      benchmark::DoNotOptimize(out);
    } else {
      w.shard->lookup(queries[i], ctx, &result);
      benchmark::DoNotOptimize(result);
    }
    if (++i == reqs.size()) i = 0;
  }
  state.counters["allocs_per_lookup"] =
      static_cast<double>(g_allocs.load(std::memory_order_relaxed) - allocs) /
      static_cast<double>(state.iterations());
  state.counters["entries"] = static_cast<double>(w.shard->entry_count());
}

void chain_lookup(benchmark::State& state, World& w, std::size_t chains, bool wire = true,
                  std::size_t blocks = 64) {
  std::vector<pb::LookupRouteRequest> reqs;
  for (std::size_t c = 0; c < chains; ++c) reqs.push_back(chain_request(w, c, blocks));
  run_lookups(state, w, reqs, wire);
  const pb::LookupRouteResponse out = answer(w, reqs.back());
  if (out.reason_code() != "PREFIX_MATCH" || out.replica_scores_size() != 8)
    state.SkipWithError("probe did not match 8 replicas");
}
void BM_ChainLookup64x8(benchmark::State& state) { chain_lookup(state, world(), 1); }
BENCHMARK(BM_ChainLookup64x8);
// A different probe chain on every call (512 chains, 13 MB of records).
void BM_ChainLookup64x8_Cold(benchmark::State& state) {
  chain_lookup(state, world(), world().probes.size());
}
BENCHMARK(BM_ChainLookup64x8_Cold);
// The index alone (Shard::lookup, no protobuf on either side).
void BM_ChainLookup64x8_Index(benchmark::State& state) { chain_lookup(state, world(), 1, false); }
BENCHMARK(BM_ChainLookup64x8_Index);
void BM_ChainLookup64x8_Index_Cold(benchmark::State& state) {
  chain_lookup(state, world(), world().probes.size(), false);
}
BENCHMARK(BM_ChainLookup64x8_Index_Cold);
// The same probe on a 10,000-entry index: the difference is cache misses.
void BM_ChainLookup64x8_SmallIndex(benchmark::State& state) {
  chain_lookup(state, small_world(), 1);
}
BENCHMARK(BM_ChainLookup64x8_SmallIndex);
// 8 blocks all 8 replicas hold: a chain as long as perf/compare.sh's hot request (which
// 2 replicas hold there), through the service edge and the index alone.
void BM_ChainLookup8x8(benchmark::State& state) { chain_lookup(state, world(), 1, true, 8); }
BENCHMARK(BM_ChainLookup8x8);
void BM_ChainLookup8x8_Index(benchmark::State& state) { chain_lookup(state, world(), 1, false, 8); }
BENCHMARK(BM_ChainLookup8x8_Index);

void exact_lookup(benchmark::State& state, std::size_t chains, bool wire = true) {
  World& w = world();
  std::vector<pb::LookupRouteRequest> reqs;
  for (std::size_t c = 0; c < chains; ++c) reqs.push_back(exact_request(w, c));
  run_lookups(state, w, reqs, wire);
  // All 8 hold it: dp = 0 → routing floor → AFFINITY_HINT (the full pipeline).
  if (answer(w, reqs.back()).reason_code().empty()) state.SkipWithError("no answer");
}
void BM_ExactLookup(benchmark::State& state) { exact_lookup(state, 1); }
BENCHMARK(BM_ExactLookup);
void BM_ExactLookup_Cold(benchmark::State& state) { exact_lookup(state, world().probes.size()); }
BENCHMARK(BM_ExactLookup_Cold);
void BM_ExactLookup_Index(benchmark::State& state) { exact_lookup(state, 1, false); }
BENCHMARK(BM_ExactLookup_Index);
void BM_ExactLookup_Index_Cold(benchmark::State& state) {
  exact_lookup(state, world().probes.size(), false);
}
BENCHMARK(BM_ExactLookup_Index_Cold);

// 4096 updates of new 16-block chains from 8 replicas, as messages and as the
// index's value types (views into the messages, translated beforehand).
struct IngestBatch {
  std::vector<pb::CacheStateUpdate> messages;
  std::vector<ic::sharding::wire::UpdateBuffers> buffers;
  std::vector<Update> values;
  std::mt19937_64 rng{7};

  IngestBatch() {
    for (int i = 0; i < 4096; ++i) {
      std::vector<std::uint64_t> blocks(16);
      for (auto& b : blocks) b = rng();
      messages.push_back(chain_update("tenant-a", name("replica-", i % 8), blocks, kNow + i));
    }
    translate();
  }
  // New block hashes for every update (the index has the old ones now).
  void renew() {
    for (auto& u : messages) {
      for (auto& h : *u.mutable_prefixes(0)->mutable_block_hashes())
        h = ic::test::block_hash(rng());
    }
    translate();
  }
  void translate() {
    buffers.resize(messages.size());
    values.clear();
    for (std::size_t i = 0; i < messages.size(); ++i)
      values.push_back(ic::sharding::wire::to_update(messages[i], buffers[i]));
  }
};

// Ingest of new 16-block chains (16 new (key, replica) entries per update).
// `wire`: each update goes through the service edge (message → value types),
// as ReportCacheState does; else the index alone (Shard::ingest).
void ingest_chains(benchmark::State& state, bool wire) {
  IndexConfig cfg;
  cfg.max_entries = state.range(0);
  Shard shard(cfg, nullptr);
  IngestBatch batch;
  std::size_t i = 0;
  std::int64_t blocks = 0;
  for (auto _ : state) {
    if (i == batch.messages.size()) {
      state.PauseTiming();
      batch.renew();
      i = 0;
      state.ResumeTiming();
    }
    if (wire) {
      ic::sharding::wire::ingest(shard, batch.messages[i], kNow);
    } else {
      shard.ingest(batch.values[i], kNow);
    }
    ++i;
    blocks += 16;
  }
  state.SetItemsProcessed(blocks);
  state.counters["entries"] = static_cast<double>(shard.entry_count());
}
void BM_Ingest16BlockChains(benchmark::State& state) { ingest_chains(state, true); }
void BM_Ingest16BlockChains_Index(benchmark::State& state) { ingest_chains(state, false); }
// Uncapped growth to ~1M entries, and steady state at a 100,000-entry cap
// (every new block entry evicts one).
BENCHMARK(BM_Ingest16BlockChains)->Arg(100'000'000)->Iterations(62'500);
BENCHMARK(BM_Ingest16BlockChains)->Arg(100'000)->Iterations(62'500);
BENCHMARK(BM_Ingest16BlockChains_Index)->Arg(100'000'000)->Iterations(62'500);
BENCHMARK(BM_Ingest16BlockChains_Index)->Arg(100'000)->Iterations(62'500);

// Re-report of chains already in the index (refresh last_seen/tier).
void BM_IngestRefresh16(benchmark::State& state) {
  World& w = world();
  std::vector<std::uint64_t> chain(w.probe.begin(), w.probe.begin() + 16);
  auto u = chain_update("tenant-a", "replica-0", chain, kNow);
  std::int64_t blocks = 0;
  for (auto _ : state) {
    ic::sharding::wire::ingest(*w.shard, u, kNow);
    blocks += 16;
  }
  state.SetItemsProcessed(blocks);
}
BENCHMARK(BM_IngestRefresh16);

// An event of (tenant, llama, replica).
pb::CacheEvent event(pb::CacheEvent::Type type, const char* tenant, const char* replica) {
  pb::CacheEvent ev;
  ev.set_type(type);
  ev.set_tenant_id(tenant);
  ev.set_model_id("llama");
  ev.set_replica_id(replica);
  return ev;
}

// PREFIX_EVICTED on a 1M-entry index: one probe of the (tenant, model, hash)
// group table, no scan. Each iteration removes one existing entry.
void BM_PrefixEvicted(benchmark::State& state) {
  World w(1'000'000, 1);
  std::mt19937_64 rng(99);
  std::vector<std::uint64_t> keys(16 * 4096);
  for (auto& k : keys) k = rng();
  auto refill = [&] {
    for (std::size_t c = 0; c < keys.size(); c += 16) {
      std::vector<std::uint64_t> blocks(keys.begin() + static_cast<long>(c),
                                        keys.begin() + static_cast<long>(c + 16));
      ic::sharding::wire::ingest(*w.shard, chain_update("tenant-a", "replica-3", blocks, kNow),
                                 kNow);
    }
  };
  refill();
  pb::CacheEvent ev = event(pb::CacheEvent::PREFIX_EVICTED, "tenant-a", "replica-3");
  std::size_t i = 0;
  std::size_t removed = 0;
  for (auto _ : state) {
    if (i == keys.size()) {
      state.PauseTiming();
      refill();
      i = 0;
      state.ResumeTiming();
    }
    ev.set_prefix_hash(ic::test::block_hash(keys[i++]));
    removed += ic::sharding::wire::apply_event(*w.shard, ev, kNow);
  }
  if (removed != static_cast<std::size_t>(state.iterations())) state.SkipWithError("missed");
}
BENCHMARK(BM_PrefixEvicted);

// A tenant of 1,000 keys (63 16-block chains of one replica) next to the
// 1,000,000 entries of the others in the same shard: the cost of its
// ALL_CLEARED and of its quota evictions should follow its own size, not the
// shard's (a peer may send ALL_CLEARED events in a stream).
constexpr int kSmallChains = 63;

std::vector<std::uint64_t> small_chain(std::mt19937_64& rng) {
  std::vector<std::uint64_t> blocks(16);
  for (auto& b : blocks) b = rng();
  return blocks;
}

// ALL_CLEARED of the small tenant's replica: 16 × range(0) entries removed per
// event (refilled outside the timing). 630 chains (10,080 keys, 1 % of the
// shard) is past a tenant's key list (docs/index.md "Layout and memory").
void BM_AllClearedSmallTenant(benchmark::State& state) {
  const auto tenant_chains = static_cast<int>(state.range(0));
  World w(1'000'000, 1);
  std::mt19937_64 rng(5);
  std::vector<std::vector<std::uint64_t>> chains;
  for (int c = 0; c < tenant_chains; ++c) chains.push_back(small_chain(rng));
  auto refill = [&] {
    for (const auto& blocks : chains)
      ic::sharding::wire::ingest(*w.shard, chain_update("tenant-small", "replica-s", blocks, kNow),
                                 kNow);
  };
  const pb::CacheEvent ev = event(pb::CacheEvent::ALL_CLEARED, "tenant-small", "replica-s");
  std::size_t removed = 0;
  for (auto _ : state) {
    state.PauseTiming();
    refill();
    state.ResumeTiming();
    removed += ic::sharding::wire::apply_event(*w.shard, ev, kNow);
  }
  if (removed != static_cast<std::size_t>(16 * tenant_chains * state.iterations()))
    state.SkipWithError("missed");
  state.counters["entries"] = static_cast<double>(w.shard->entry_count());
}
BENCHMARK(BM_AllClearedSmallTenant)
    ->Arg(kSmallChains)
    ->Arg(630)
    ->Iterations(200)
    ->Unit(benchmark::kMicrosecond);

// The small tenant at its quota (1,000 keys): each update of a new 16-block
// chain evicts its 16 oldest keys (the time per update, victim scans
// included).
void BM_QuotaEvictSmallTenant(benchmark::State& state) {
  World w(1'000'000, 1);
  auto parsed = ic::config::parse_policy_json(
      R"({"version":7,"tenants":[{"tenantID":"tenant-small","maxIndexEntries":1000}]})");
  if (!parsed.ok()) {
    state.SkipWithError(parsed.error.c_str());
    return;
  }
  w.shard->set_policies(parsed.set);
  std::mt19937_64 rng(6);
  std::int64_t ts = kNow;
  auto add = [&] {
    ic::sharding::wire::ingest(
        *w.shard, chain_update("tenant-small", "replica-s", small_chain(rng), ++ts), kNow);
  };
  for (int c = 0; c < kSmallChains; ++c) add();
  const std::int64_t at_quota = w.shard->entry_count();
  for (auto _ : state) add();
  // Every update evicted as many keys as it added.
  if (w.shard->entry_count() != at_quota) state.SkipWithError("quota not held");
  state.counters["entries"] = static_cast<double>(w.shard->entry_count());
}
BENCHMARK(BM_QuotaEvictSmallTenant)->Iterations(4096)->Unit(benchmark::kMicrosecond);

// One TTL sweep slice of 4096 entry slots over the 1M-entry index, nothing
// expiring (the common case between expiries).
void BM_SweepSlice4096(benchmark::State& state) {
  World& w = world();
  std::int64_t slots = 0;
  for (auto _ : state) {
    w.shard->sweep_slice(kNow, 4096);
    slots += 4096;
  }
  state.SetItemsProcessed(slots);
}
BENCHMARK(BM_SweepSlice4096);

// ---- floors: independent random probes into a table of the same shape ----

// range(0) probes per iteration. range(1) = 1: the same positions every
// iteration (cache-hot, as the lookup benchmarks repeat one request); 0: fresh
// positions (cache-cold, a different prompt on every call).
void BM_ProbeFloor(benchmark::State& state) {
  const std::vector<FloorRec>& t = floor_table();
  const int probes = static_cast<int>(state.range(0));
  const bool hot = state.range(1) == 1;
  std::vector<std::uint32_t> fixed(static_cast<std::size_t>(probes));
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  for (auto& f : fixed) f = static_cast<std::uint32_t>(next_random(x) % t.size());
  std::uint64_t sum = 0;
  for (auto _ : state) {
    if (hot) {
      for (const std::uint32_t i : fixed) sum += t[i].word[0];
    } else {
      for (int p = 0; p < probes; ++p) sum += t[next_random(x) % t.size()].word[0];
    }
    benchmark::DoNotOptimize(sum);
  }
}
BENCHMARK(BM_ProbeFloor)->Args({kChainProbes, 1})->Args({kChainProbes, 0});
BENCHMARK(BM_ProbeFloor)->Args({kExactProbes, 1})->Args({kExactProbes, 0});

// Ingest's floor: per block entry, one independent random read-modify-write
// of a record (the hash probe that finds the slot, then the record written),
// 16 per 16-block update. Items = block entries.
void BM_WriteFloor16(benchmark::State& state) {
  std::vector<FloorRec>& t = floor_table();
  std::uint64_t x = 0x2545F4914F6CDD1Dull;
  std::int64_t blocks = 0;
  for (auto _ : state) {
    for (int b = 0; b < 16; ++b) {
      FloorRec& r = t[next_random(x) % t.size()];
      r.word[1] = r.word[0] + x;
      r.word[2] = static_cast<std::uint64_t>(b);
      r.word[3] = x;
    }
    blocks += 16;
  }
  state.SetItemsProcessed(blocks);
}
BENCHMARK(BM_WriteFloor16);

// The chain lookup's required work (perf/index_floors.hh): 64 seeded hashes,
// 64 slot and key probes, one pass over the 400 entries of the probe chain,
// cache-hot. No layout makes the hot chain lookup cheaper than this.
void BM_ChainWorkFloor(benchmark::State& state) {
  static const ChainWork work;
  std::uint64_t blocks = 0;
  for (auto _ : state) {
    blocks += work.lookup();
    benchmark::DoNotOptimize(blocks);
  }
  if (blocks != 400 * static_cast<std::uint64_t>(state.iterations()))
    state.SkipWithError("the floor's chain did not match 400 entries");
}
BENCHMARK(BM_ChainWorkFloor);

// Ingest's required work for new 16-block chains (perf/index_floors.hh): per
// block entry a seeded hash, a probe to an empty slot, the slot and tag written
// and the key record appended, 1,000,000 keys per run. range(0) = 1: table
// and records sized and touched beforehand; 0: both grow from empty, as the
// index's do in BM_Ingest16BlockChains/100000000. Items = block entries.
void BM_IngestWorkFloor16(benchmark::State& state) {
  const bool presized = state.range(0) == 1;
  IngestWork work(62'500 * 16, presized);
  std::uint64_t x = 0x2545F4914F6CDD1Dull;
  std::int64_t blocks = 0;
  std::vector<std::uint64_t> bytes(62'500 * 16);
  for (auto& b : bytes) b = next_random(x);
  for (auto _ : state) {
    work.insert_chain(&bytes[static_cast<std::size_t>(blocks)], 3, kNow);
    blocks += 16;
  }
  if (work.size() != static_cast<std::size_t>(blocks)) state.SkipWithError("keys lost");
  state.SetItemsProcessed(blocks);
}
BENCHMARK(BM_IngestWorkFloor16)->Arg(1)->Arg(0)->Iterations(62'500);

// The console report, plus each run's CPU time per iteration and items/s by
// benchmark name, for the ratios printed after the table.
class FloorReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      // With --benchmark_report_aggregates_only only the aggregates arrive:
      // keep the median of the repetitions then.
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median") continue;
      // A median aggregate replaces the repetitions it summarizes.
      const std::string name = r.run_name.str();
      const bool median_run = r.run_type == Run::RT_Aggregate;
      if (median_run) cpu_ns_[name].clear();
      cpu_ns_[name].push_back(r.GetAdjustedCPUTime());
      const auto it = r.counters.find("items_per_second");
      if (it == r.counters.end()) continue;
      if (median_run) rate_[name].clear();
      rate_[name].push_back(it->second.value);
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void print_ratios() const {
    std::printf("\nfloor ratios (medians, CPU time):\n");
    lookup_ratio("chain lookup 64x8", "BM_ChainLookup64x8", kChainProbes);
    lookup_ratio("  index alone", "BM_ChainLookup64x8_Index", kChainProbes);
    lookup_ratio("exact lookup", "BM_ExactLookup", kExactProbes);
    lookup_ratio("  index alone", "BM_ExactLookup_Index", kExactProbes);
    work_ratio();
    ingest_ratio("ingest (uncapped)", "BM_Ingest16BlockChains/100000000/iterations:62500");
    ingest_ratio("  index alone", "BM_Ingest16BlockChains_Index/100000000/iterations:62500");
    ingest_ratio("  work floor, sized", "BM_IngestWorkFloor16/1/iterations:62500");
    ingest_ratio("  work floor, grown", "BM_IngestWorkFloor16/0/iterations:62500");
  }

 private:
  using Series = std::map<std::string, std::vector<double>>;
  static double median(const Series& s, const std::string& name) {
    const auto it = s.find(name);
    if (it == s.end() || it->second.empty()) return 0;
    std::vector<double> v = it->second;
    std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
    return v[v.size() / 2];
  }
  // The hot chain lookup's required work against the hot probe floor (if
  // above 1.5x, no layout meets the target), and the index alone against it.
  void work_ratio() const {
    const double work = median(cpu_ns_, "BM_ChainWorkFloor");
    char hot_name[64];
    std::snprintf(hot_name, sizeof hot_name, "BM_ProbeFloor/%d/1", kChainProbes);
    const double hot = median(cpu_ns_, hot_name);
    const double op = median(cpu_ns_, "BM_ChainLookup64x8_Index");
    if (work > 0 && hot > 0)
      std::printf("  %-18s hot  %7.0f ns; floor, %d hot probes  %6.0f ns: %6.2fx (target <= 1.5)\n",
                  "  work floor", work, kChainProbes, hot, work / hot);
    if (work > 0 && op > 0)
      std::printf("  %-18s index alone %7.0f ns against its work floor: %.2fx\n", "", op,
                  op / work);
  }
  // `name`'s block entries/s against the write floor's.
  void ingest_ratio(const char* what, const std::string& name) const {
    const double ingest = median(rate_, name);
    const double floor = median(rate_, "BM_WriteFloor16");
    if (ingest > 0 && floor > 0) {
      std::printf("  %-18s %7.2f M block entries/s, write floor %7.2f M/s: %.2fx (target >= 0.5)\n",
                  what, ingest / 1e6, floor / 1e6, ingest / floor);
    }
  }
  // `name` (one request, hot) against the hot floor, name_Cold (a different
  // probe chain per call) against the cold floor.
  void lookup_ratio(const char* what, const std::string& name, int probes) const {
    const double op = median(cpu_ns_, name);
    const double op_cold = median(cpu_ns_, name + "_Cold");
    char hot_name[64], cold_name[64];
    std::snprintf(hot_name, sizeof hot_name, "BM_ProbeFloor/%d/1", probes);
    std::snprintf(cold_name, sizeof cold_name, "BM_ProbeFloor/%d/0", probes);
    const double hot = median(cpu_ns_, hot_name);
    const double cold = median(cpu_ns_, cold_name);
    if (op > 0 && hot > 0) {
      std::printf("  %-18s hot  %7.0f ns; floor, %d hot probes  %6.0f ns: %6.2fx (target <= 1.5)\n",
                  what, op, probes, hot, op / hot);
    }
    if (op_cold > 0 && cold > 0) {
      std::printf("  %-18s cold %7.0f ns; floor, %d cold probes %6.0f ns: %6.2fx (target <= 1.5)\n",
                  what, op_cold, probes, cold, op_cold / cold);
    }
  }
  Series cpu_ns_, rate_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  FloorReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios();
  benchmark::Shutdown();
  return 0;
}
