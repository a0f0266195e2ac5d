// Bytes per (key, replica) entry at 1,000,000 entries (issue target ≤ 48 at
// one replica per key). Linked with mimalloc like the server, it measures the
// RSS delta around building the index, with mimalloc's freed pages handed back
// first (mi_collect, no decommit delay), plus the index's own accounting
// (Shard::memory_bytes). mimalloc's own commit counter is not reported: it
// misses the large OS-backed buffers the slabs live in.
//
// Run: <build>/perf/index_memory --benchmark_repetitions=3

#include <benchmark/benchmark.h>
#include <mimalloc.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "index/shard.hh"
#include "sharding/index_wire.hh"

namespace {

using namespace ic::index;
namespace pb = ::inferencecache::v1alpha1;

std::string hb(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (56 - 8 * i));
  return s;
}

std::int64_t rss_bytes() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  std::fclose(f);
  return static_cast<std::int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

// Hands mimalloc's free pages back to the OS now (no decommit delay), so
// that buffers freed by vector growth leave the RSS.
void release_free_pages() {
  mi_option_set(mi_option_decommit_delay, 0);
  mi_option_set(mi_option_segment_decommit_delay, 0);
  mi_collect(true);
}

// Builds 1,000,000 entries: range(0) replicas hold each 16-block chain.
void BM_BytesPerEntry(benchmark::State& state) {
  const int replicas = static_cast<int>(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    release_free_pages();
    const std::int64_t rss0 = rss_bytes();
    state.ResumeTiming();
    IndexConfig cfg;
    cfg.max_entries = 2'000'000;
    auto shard = std::make_unique<Shard>(cfg, nullptr);
    std::mt19937_64 rng(1);
    pb::CacheStateUpdate u;
    u.set_tenant_id("tenant-a");
    u.set_model_id("llama");
    u.set_hash_scheme("vllm");
    u.set_timestamp_us(1'700'000'000'000'000);
    auto* p = u.add_prefixes();
    for (int b = 0; b < 16; ++b) {
      p->add_block_hashes(hb(0));
      p->add_block_token_counts(16);
    }
    while (shard->entry_count() < 1'000'000) {
      for (auto& h : *p->mutable_block_hashes()) h = hb(rng());
      for (int r = 0; r < replicas; ++r) {
        u.set_replica_id(std::string("replica-").append(std::to_string(r)));
        ic::sharding::wire::ingest(*shard, u, 1'700'000'000'000'000);
      }
    }
    state.PauseTiming();
    // Pages freed by vector growth are not index memory.
    release_free_pages();
    const double n = static_cast<double>(shard->entry_count());
    state.counters["entries"] = n;
    state.counters["rss_B_per_entry"] = static_cast<double>(rss_bytes() - rss0) / n;
    state.counters["self_B_per_entry"] = static_cast<double>(shard->memory_bytes()) / n;
    shard.reset();
    state.ResumeTiming();
  }
}
BENCHMARK(BM_BytesPerEntry)->Arg(1)->Arg(8)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
