// The baseline's wiring around the shared index: deadline conversion and
// tenant → shard routing (each tenant's ingest and lookup meet on one shard).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

#include "index/partition.hh"
#include "sharded_index.hh"

namespace pb = ::inferencecache::v1alpha1;
using ic::perf::ShardedIndex;
using std::chrono::system_clock;

namespace {

constexpr std::chrono::milliseconds kNoSweep{0};

// A chain of 4 blocks × 16 tokens held by `replica` (64 tokens: exactly the
// default minimumMatchedTokens floor, so it is delivered).
pb::CacheStateUpdate update_for(const std::string& tenant, const std::string& replica) {
  pb::CacheStateUpdate u;
  u.set_tenant_id(tenant);
  u.set_model_id("m");
  u.set_hash_scheme("s");
  u.set_replica_id(replica);
  pb::PrefixEntry* e = u.add_prefixes();
  for (int j = 0; j < 4; ++j) {
    e->add_block_hashes(tenant + "-block-" + std::to_string(j));
    e->add_block_token_counts(16);
  }
  return u;
}

pb::LookupRouteRequest request_for(const std::string& tenant) {
  pb::LookupRouteRequest r;
  r.set_tenant_id(tenant);
  r.set_model_id("m");
  r.set_hash_scheme("s");
  for (int j = 0; j < 4; ++j) {
    r.add_block_hashes(tenant + "-block-" + std::to_string(j));
    r.add_block_token_counts(16);
  }
  return r;
}

}  // namespace

TEST_CASE("deadline_to_monotonic_us keeps the remaining time and maps 'none' to INT64_MAX") {
  const system_clock::time_point now = system_clock::now();
  CHECK(ic::perf::deadline_to_monotonic_us(system_clock::time_point::max(), now, 1000) ==
        std::numeric_limits<std::int64_t>::max());
  CHECK(ic::perf::deadline_to_monotonic_us(now + std::chrono::microseconds(1500), now, 1000) ==
        2500);
  CHECK(ic::perf::deadline_to_monotonic_us(now - std::chrono::milliseconds(10), now, 50'000) ==
        40'000);
}

TEST_CASE("shard_of is the server's owner_core partitioning; zero shards means one") {
  ShardedIndex four(4, kNoSweep);
  CHECK(four.shards() == 4);
  for (const char* tenant : {"", "a", "tenant-0", "tenant-1", "tenant-7", "acme"}) {
    CHECK(four.shard_of(tenant) == ic::index::owner_core(tenant, 4));
  }
  ShardedIndex none(0, kNoSweep);
  CHECK(none.shards() == 1);
  CHECK(none.shard_of("tenant-3") == 0);
}

TEST_CASE("each tenant's ingest and lookup meet on its own shard") {
  ShardedIndex index(4, kNoSweep);
  // Two tenants owned by different shards, so a routing slip cannot pass.
  std::string first = "tenant-0";
  std::string second;
  for (int i = 1; second.empty(); ++i) {
    const std::string t = "tenant-" + std::to_string(i);
    if (index.shard_of(t) != index.shard_of(first)) second = t;
  }
  REQUIRE(index.shard_of(first) != index.shard_of(second));

  CHECK(index.ingest(update_for(first, "replica-a")).entries_upserted == 4);
  CHECK(index.ingest(update_for(second, "replica-b")).entries_upserted == 4);

  pb::LookupRouteResponse out;
  index.lookup(request_for(first), system_clock::time_point::max(), out);
  CHECK(out.reason_code() == "PREFIX_MATCH");
  REQUIRE(out.replica_scores_size() == 1);
  CHECK(out.replica_scores(0).replica_id() == "replica-a");
  CHECK(out.replica_scores(0).matched_tokens() == 64);

  index.lookup(request_for(second), system_clock::time_point::max(), out);
  CHECK(out.reason_code() == "PREFIX_MATCH");
  REQUIRE(out.replica_scores_size() == 1);
  CHECK(out.replica_scores(0).replica_id() == "replica-b");
  CHECK(out.replica_scores(0).matched_tokens() == 64);
}

TEST_CASE("a grpc++ deadline already past answers TIMEOUT") {
  ShardedIndex index(2, kNoSweep);
  index.ingest(update_for("tenant-0", "replica-a"));
  pb::LookupRouteResponse out;
  index.lookup(request_for("tenant-0"), system_clock::now() - std::chrono::seconds(1), out);
  CHECK(out.reason_code() == "TIMEOUT");
  CHECK(out.replica_scores_size() == 0);
}
