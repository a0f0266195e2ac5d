#pragma once
// The 1,000,000-entry index the index benchmarks read (perf/index_bench.cc)
// and the single-tenant ceiling drives (perf/single_tenant.cc), and the
// LookupRoute requests that probe it.

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "builders.hh"
#include "index/clock.hh"
#include "index/shard.hh"
#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "sharding/index_wire.hh"
#include "text.hh"

namespace ic::perf {

namespace pb = ::inferencecache::v1alpha1;
using index::IndexConfig;
using index::ManualClock;
using index::Shard;

// The wall clock of every entry and lookup (µs).
inline constexpr std::int64_t kNow = 1'700'000'000'000'000;

inline std::string name(const char* prefix, std::uint64_t i) {
  return ic::itest::numbered(prefix, static_cast<long long>(i));
}

inline pb::CacheStateUpdate chain_update(const std::string& tenant, const std::string& replica,
                                         const std::vector<std::uint64_t>& blocks,
                                         std::int64_t ts) {
  return ic::test::chain_update(tenant, "llama", "vllm", replica, ts, blocks);
}

// A 1,000,000-entry index: `chains` probe chains (64 blocks; replica k holds
// the first 64 − 4k blocks, so 8 replicas at distinct depths; 400 entries
// each) plus filler chains of 16 blocks spread over 8 replicas of the same
// tenant and 100 other tenants.
struct World {
  std::unique_ptr<Shard> shard;
  std::vector<std::vector<std::uint64_t>> probes;
  std::vector<std::uint64_t> probe;  // probes[0]
  ManualClock clock;

  explicit World(std::int64_t entries = 1'000'000, int chains = 512, std::int64_t cap = 4'000'000) {
    IndexConfig cfg;
    cfg.max_entries = cap;
    shard = std::make_unique<Shard>(cfg, nullptr);
    clock.wall = kNow;
    std::mt19937_64 rng(42);
    probes.resize(static_cast<std::size_t>(chains));
    for (auto& chain : probes) {
      for (int i = 0; i < 64; ++i) chain.push_back(rng());
      for (int k = 0; k < 8; ++k) {
        std::vector<std::uint64_t> held(chain.begin(), chain.end() - 4 * k);
        ic::sharding::wire::ingest(*shard,
                                   chain_update("tenant-a", name("replica-", k), held, kNow), kNow);
      }
    }
    probe = probes[0];
    std::uint64_t i = 0;
    while (shard->entry_count() < entries) {
      std::vector<std::uint64_t> blocks(16);
      for (auto& b : blocks) b = rng();
      const std::string tenant = i % 2 == 0 ? std::string("tenant-a") : name("tenant-", i % 100);
      ic::sharding::wire::ingest(
          *shard, chain_update(tenant, name("replica-", i % 8), blocks, kNow - 1000), kNow);
      ++i;
    }
  }
};

inline pb::LookupRouteRequest lookup_request() {
  pb::LookupRouteRequest req;
  req.set_tenant_id("tenant-a");
  req.set_model_id("llama");
  req.set_hash_scheme("vllm");
  return req;
}

// The chain request of the first `blocks` blocks of probe chain `c` (all 64
// by default; the first 36 are held by all 8 replicas), and the exact request
// of its block 16 (held by all 8 replicas with 272 cumulative tokens).
inline pb::LookupRouteRequest chain_request(const World& w, std::size_t c,
                                            std::size_t blocks = 64) {
  pb::LookupRouteRequest req = lookup_request();
  for (std::size_t i = 0; i < blocks && i < w.probes[c].size(); ++i) {
    req.add_block_hashes(ic::test::block_hash(w.probes[c][i]));
    req.add_block_token_counts(16);
  }
  return req;
}
inline pb::LookupRouteRequest exact_request(const World& w, std::size_t c) {
  pb::LookupRouteRequest req = lookup_request();
  req.set_prefix_hash(ic::test::block_hash(w.probes[c][16]));
  req.set_prefix_token_count(272);
  return req;
}

}  // namespace ic::perf
