// Index microbenchmarks (spec targets: chain lookup ≤ 2 µs on a 1,000,000-entry
// index, ingest ≥ 3,000,000 block entries/s on one core).
//
// Run: ninja -C <build> perf/index_bench, then
//   <build>/perf/index_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "builders.hh"
#include "index/shard.hh"
#include "service/index_wire.hh"
#include "text.hh"

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
namespace pb = ::inferencecache::v1alpha1;

constexpr std::int64_t kNow = 1'700'000'000'000'000;

std::string name(const char* prefix, std::uint64_t i) {
  return ic::itest::numbered(prefix, static_cast<long long>(i));
}

pb::CacheStateUpdate chain_update(const std::string& tenant, const std::string& replica,
                                  const std::vector<std::uint64_t>& blocks, std::int64_t ts) {
  return ic::test::chain_update(tenant, "llama", "vllm", replica, ts, blocks);
}

// A 1,000,000-entry index: the probe chain (64 blocks; replica k holds the
// first 64 − 4k blocks, so 8 replicas at distinct depths) plus filler chains of
// 16 blocks spread over 8 replicas of the same tenant and 100 other tenants.
struct World {
  std::unique_ptr<Shard> shard;
  std::vector<std::uint64_t> probe;
  std::uint64_t next_hash = 1ull << 40;
  ManualClock clock;

  explicit World(std::int64_t entries = 1'000'000, std::int64_t cap = 4'000'000) {
    IndexConfig cfg;
    cfg.max_entries = cap;
    shard = std::make_unique<Shard>(cfg, nullptr);
    clock.wall = kNow;
    std::mt19937_64 rng(42);
    for (int i = 0; i < 64; ++i) probe.push_back(rng());
    for (int k = 0; k < 8; ++k) {
      std::vector<std::uint64_t> held(probe.begin(), probe.end() - 4 * k);
      ic::service::wire::ingest(*shard, chain_update("tenant-a", name("replica-", k), held, kNow),
                                kNow);
    }
    std::uint64_t i = 0;
    while (shard->entry_count() < entries) {
      std::vector<std::uint64_t> blocks(16);
      for (auto& b : blocks) b = rng();
      const std::string tenant = i % 2 == 0 ? std::string("tenant-a") : name("tenant-", i % 100);
      ic::service::wire::ingest(
          *shard, chain_update(tenant, name("replica-", i % 8), blocks, kNow - 1000), kNow);
      ++i;
    }
  }
};

World& world() {
  static World w;
  return w;
}

World& small_world() {
  static World w(10'000);
  return w;
}

void chain_lookup(benchmark::State& state, World& w) {
  pb::LookupRouteRequest req;
  req.set_tenant_id("tenant-a");
  req.set_model_id("llama");
  req.set_hash_scheme("vllm");
  for (std::uint64_t b : w.probe) {
    req.add_block_hashes(ic::test::block_hash(b));
    req.add_block_token_counts(16);
  }
  pb::LookupRouteResponse out;
  LookupContext ctx;
  ctx.clock = &w.clock;
  const std::uint64_t allocs = g_allocs.load(std::memory_order_relaxed);
  for (auto _ : state) {
    ic::service::wire::lookup_route(*w.shard, req, ctx, &out);
    benchmark::DoNotOptimize(out);
  }
  state.counters["allocs_per_lookup"] =
      static_cast<double>(g_allocs.load(std::memory_order_relaxed) - allocs) /
      static_cast<double>(state.iterations());
  if (out.reason_code() != "PREFIX_MATCH" || out.replica_scores_size() != 8)
    state.SkipWithError("probe did not match 8 replicas");
  state.counters["entries"] = static_cast<double>(w.shard->entry_count());
}
void BM_ChainLookup64x8(benchmark::State& state) { chain_lookup(state, world()); }
BENCHMARK(BM_ChainLookup64x8);
// The same probe on a 10,000-entry index: the difference is cache misses.
void BM_ChainLookup64x8_SmallIndex(benchmark::State& state) { chain_lookup(state, small_world()); }
BENCHMARK(BM_ChainLookup64x8_SmallIndex);

void BM_ExactLookup(benchmark::State& state) {
  World& w = world();
  // Block 16 of the probe is held by all 8 replicas with 272 cumulative tokens.
  pb::LookupRouteRequest req;
  req.set_tenant_id("tenant-a");
  req.set_model_id("llama");
  req.set_hash_scheme("vllm");
  req.set_prefix_hash(ic::test::block_hash(w.probe[16]));
  req.set_prefix_token_count(272);
  pb::LookupRouteResponse out;
  LookupContext ctx;
  ctx.clock = &w.clock;
  const std::uint64_t allocs = g_allocs.load(std::memory_order_relaxed);
  for (auto _ : state) {
    ic::service::wire::lookup_route(*w.shard, req, ctx, &out);
    benchmark::DoNotOptimize(out);
  }
  state.counters["allocs_per_lookup"] =
      static_cast<double>(g_allocs.load(std::memory_order_relaxed) - allocs) /
      static_cast<double>(state.iterations());
  // All 8 hold it: dp = 0 → routing floor → AFFINITY_HINT (the full pipeline).
  if (out.reason_code().empty()) state.SkipWithError("no answer");
}
BENCHMARK(BM_ExactLookup);

// Ingest of new 16-block chains (16 new (key, replica) entries per update).
void BM_Ingest16BlockChains(benchmark::State& state) {
  IndexConfig cfg;
  cfg.max_entries = state.range(0);
  Shard shard(cfg, nullptr);
  std::mt19937_64 rng(7);
  std::vector<pb::CacheStateUpdate> batch;
  for (int i = 0; i < 4096; ++i) {
    std::vector<std::uint64_t> blocks(16);
    for (auto& b : blocks) b = rng();
    batch.push_back(chain_update("tenant-a", name("replica-", i % 8), blocks, kNow + i));
  }
  std::size_t i = 0;
  std::int64_t blocks = 0;
  for (auto _ : state) {
    if (i == batch.size()) {
      state.PauseTiming();
      for (auto& u : batch) {
        for (auto& h : *u.mutable_prefixes(0)->mutable_block_hashes())
          h = ic::test::block_hash(rng());
      }
      i = 0;
      state.ResumeTiming();
    }
    ic::service::wire::ingest(shard, batch[i++], kNow);
    blocks += 16;
  }
  state.SetItemsProcessed(blocks);
  state.counters["entries"] = static_cast<double>(shard.entry_count());
}
// Uncapped growth to ~1M entries, and steady state at a 100,000-entry cap
// (every new block entry evicts one).
BENCHMARK(BM_Ingest16BlockChains)->Arg(100'000'000)->Iterations(62'500);
BENCHMARK(BM_Ingest16BlockChains)->Arg(100'000)->Iterations(62'500);

// Re-report of chains already in the index (refresh last_seen/tier).
void BM_IngestRefresh16(benchmark::State& state) {
  World& w = world();
  std::vector<std::uint64_t> chain(w.probe.begin(), w.probe.begin() + 16);
  auto u = chain_update("tenant-a", "replica-0", chain, kNow);
  std::int64_t blocks = 0;
  for (auto _ : state) {
    ic::service::wire::ingest(*w.shard, u, kNow);
    blocks += 16;
  }
  state.SetItemsProcessed(blocks);
}
BENCHMARK(BM_IngestRefresh16);

// PREFIX_EVICTED on a 1M-entry index: one probe of the (tenant, model, hash)
// group table, no scan. Each iteration removes one existing entry.
void BM_PrefixEvicted(benchmark::State& state) {
  World w(1'000'000);
  std::mt19937_64 rng(99);
  std::vector<std::uint64_t> keys(16 * 4096);
  for (auto& k : keys) k = rng();
  auto refill = [&] {
    for (std::size_t c = 0; c < keys.size(); c += 16) {
      std::vector<std::uint64_t> blocks(keys.begin() + static_cast<long>(c),
                                        keys.begin() + static_cast<long>(c + 16));
      ic::service::wire::ingest(*w.shard, chain_update("tenant-a", "replica-3", blocks, kNow),
                                kNow);
    }
  };
  refill();
  pb::CacheEvent ev;
  ev.set_type(pb::CacheEvent::PREFIX_EVICTED);
  ev.set_tenant_id("tenant-a");
  ev.set_model_id("llama");
  ev.set_replica_id("replica-3");
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
    removed += ic::service::wire::apply_event(*w.shard, ev, kNow);
  }
  if (removed != static_cast<std::size_t>(state.iterations())) state.SkipWithError("missed");
}
BENCHMARK(BM_PrefixEvicted);

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

}  // namespace

BENCHMARK_MAIN();
