// Bytes per (key, replica) entry at 1,000,000 entries (target ≤ 96).
// Measures the glibc allocator's in-use bytes (mallinfo2: arena + mmapped) and
// the RSS delta around building the index (after malloc_trim), plus the
// index's own accounting (Shard::memory_bytes).
//
// Run: <build>/perf/index_memory --benchmark_repetitions=3

#include <benchmark/benchmark.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "index/shard.hh"
#include "service/index_wire.hh"

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

// Bytes handed out by glibc malloc: small/medium chunks plus mmapped ones.
std::int64_t heap_in_use() {
  const struct mallinfo2 mi = mallinfo2();
  return static_cast<std::int64_t>(mi.uordblks + mi.hblkhd);
}

// Builds 1,000,000 entries: range(0) replicas hold each 16-block chain.
void BM_BytesPerEntry(benchmark::State& state) {
  const int replicas = static_cast<int>(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    malloc_trim(0);
    const std::int64_t heap0 = heap_in_use();
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
        ic::service::wire::ingest(*shard, u, 1'700'000'000'000'000);
      }
    }
    state.PauseTiming();
    // Free heap chunks left by vector growth are not index memory: hand them
    // back before reading RSS.
    malloc_trim(0);
    const double n = static_cast<double>(shard->entry_count());
    state.counters["entries"] = n;
    state.counters["heap_B_per_entry"] = static_cast<double>(heap_in_use() - heap0) / n;
    state.counters["rss_B_per_entry"] = static_cast<double>(rss_bytes() - rss0) / n;
    state.counters["self_B_per_entry"] = static_cast<double>(shard->memory_bytes()) / n;
    shard.reset();
    state.ResumeTiming();
  }
}
BENCHMARK(BM_BytesPerEntry)->Arg(1)->Arg(8)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
