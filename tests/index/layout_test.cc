// The entry layout (docs/index.md "Layout and memory"): a key's first entry
// inline, the others spilled; removal in any order, the inline slot reused;
// the export's visiting order; PREFIX_EVICTED over one probe run; ALL_CLEARED
// and the quota of a small tenant next to a large one (tenant_keys_test.cc
// walks their key lists in detail).

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "helpers.hh"

using namespace ic::index;
using namespace ic::index::test;

namespace {
const char* kNoFloors =
    R"({"version":7,"policies":[{"namespace":"t","minimumMatchedTokens":0,"routingFloorScore":0}]})";

// Every exported entry as "replica@hash-last-byte/tokens", in visiting order,
// taking `budget` slots per slice.
std::vector<std::string> exported(const Shard& s, std::size_t budget) {
  std::vector<std::string> out;
  std::uint32_t cursor = 0;
  while (!s.export_entries(&cursor, budget, [&](const EntryView& v) {
    std::string row(v.replica);
    row.append("@").append(std::to_string(static_cast<unsigned char>(v.prefix_hash.back())));
    row.append("/").append(std::to_string(v.token_count));
    out.push_back(std::move(row));
  })) {
  }
  return out;
}

// The replicas holding exact key `hash` of (t, m, vllm), by PREFIX_MATCH.
std::vector<std::string> holders(Harness& h, std::uint64_t hash) {
  std::vector<std::string> out;
  const auto r = h.lookup(exact_req("t", "m", "vllm", hash, 16));
  if (r.reason_code() != "PREFIX_MATCH") return out;
  for (const auto& s : r.replica_scores()) out.push_back(s.replica_id());
  return out;
}
}  // namespace

TEST_CASE("entries of a key: removal in any order, the inline slot reused, export order") {
  Harness h;
  h.policy(kNoFloors);
  for (const char* r : {"r1", "r2", "r3"})
    h.ingest(exact_update("t", "m", "vllm", r, kNow, {{1, 16}}));
  h.ingest(exact_update("t", "m", "vllm", "r1", kNow, {{2, 32}}));
  CHECK(h.shard->entry_count() == 4);
  // Inline entries in key order (r1@1, r1@2), then the spills in slot order (r2, r3 of key 1).
  CHECK(exported(*h.shard, 1000) ==
        std::vector<std::string>{"r1@1/16", "r1@2/32", "r2@1/16", "r3@1/16"});
  // Slices of one slot visit the same entries in the same order.
  CHECK(exported(*h.shard, 1) == exported(*h.shard, 1000));

  // The inline entry goes first: the spilled ones still answer.
  CHECK(h.event(pb::CacheEvent::PREFIX_EVICTED, "t", "m", "r1", hb(1)) == 1);
  CHECK(holders(h, 1) == std::vector<std::string>{"r2", "r3"});
  CHECK(h.cache_state("t", "m").summary().total_prefixes() == 2);
  // A new replica takes the empty inline slot.
  h.ingest(exact_update("t", "m", "vllm", "r4", kNow, {{1, 16}}));
  CHECK(exported(*h.shard, 1000) ==
        std::vector<std::string>{"r4@1/16", "r1@2/32", "r2@1/16", "r3@1/16"});
  // A spill in the middle of the key's list, then the last one.
  CHECK(h.event(pb::CacheEvent::PREFIX_EVICTED, "t", "m", "r3", hb(1)) == 1);
  CHECK(h.event(pb::CacheEvent::PREFIX_EVICTED, "t", "m", "r2", hb(1)) == 1);
  CHECK(holders(h, 1) == std::vector<std::string>{"r4"});
  // Every entry gone: the key goes, the other key stays.
  CHECK(h.event(pb::CacheEvent::PREFIX_EVICTED, "t", "m", "r4", hb(1)) == 1);
  CHECK(holders(h, 1).empty());
  CHECK(holders(h, 2) == std::vector<std::string>{"r1"});
  CHECK(h.cache_state("t", "m").summary().total_prefixes() == 1);
  CHECK(h.shard->entry_count() == 1);
  // The freed key slot and spill slots are reused (LIFO), nothing is lost.
  for (const char* r : {"r5", "r6"}) h.ingest(exact_update("t", "m", "vllm", r, kNow, {{3, 48}}));
  CHECK(exported(*h.shard, 1000) == std::vector<std::string>{"r5@3/48", "r1@2/32", "r6@3/48"});
  CHECK(holders(h, 3) == std::vector<std::string>{"r5", "r6"});
}

TEST_CASE("one probe run per group: PREFIX_EVICTED across schemes, keys of other models kept") {
  Harness h;
  h.policy(kNoFloors);
  // 200 keys of another model, and key 7 of (t, m) in 3 schemes × 2 adapters: one group.
  for (std::uint64_t k = 0; k < 200; ++k)
    h.ingest(exact_update("t", "m2", "vllm", "r1", kNow, {{k, 16}}));
  for (const char* scheme : {"vllm", "sglang", "trt"}) {
    h.ingest(exact_update("t", "m", scheme, "r1", kNow, {{7, 16}}));
    h.ingest(exact_update("t", "m", scheme, "r1", kNow, {{7, 16}}, 0, "lora"));
    h.ingest(exact_update("t", "m", scheme, "r2", kNow, {{7, 16}}));
  }
  CHECK(h.shard->entry_count() == 209);
  CHECK(h.event(pb::CacheEvent::PREFIX_EVICTED, "t", "m", "r1", hb(7), "lora") == 3);
  CHECK(h.event(pb::CacheEvent::PREFIX_EVICTED, "t", "m", "r1", hb(7)) == 3);
  CHECK(h.shard->entry_count() == 203);
  CHECK(holders(h, 7) == std::vector<std::string>{"r2"});
  CHECK(h.event(pb::CacheEvent::PREFIX_EVICTED, "t", "m", "r2", hb(7)) == 3);
  CHECK(h.cache_state("t", "m").summary().total_prefixes() == 0);
  CHECK(h.cache_state("t", "m2").summary().total_prefixes() == 200);
  for (std::uint64_t k = 0; k < 200; ++k) {
    const auto r = h.lookup(exact_req("t", "m2", "vllm", k, 16));
    REQUIRE(r.reason_code() == "PREFIX_MATCH");
  }
}

TEST_CASE("ALL_CLEARED and the quota of a small tenant: other tenants and models untouched") {
  Harness h;
  h.policy(R"({"version":7,"policies":[{"namespace":"small","minimumMatchedTokens":0,
    "routingFloorScore":0}],"tenants":[{"tenantID":"small","maxIndexEntries":4}]})");
  // A large tenant, then a small one whose keys interleave with it in the key slab.
  for (std::uint64_t k = 0; k < 1000; ++k) {
    h.ingest(
        exact_update("big", "m", "vllm", "r1", kNow + static_cast<std::int64_t>(k), {{k, 16}}));
    if (k % 100 == 0)
      h.ingest(
          exact_update("small", "m", "vllm", "r1", kNow + static_cast<std::int64_t>(k), {{k, 16}}));
  }
  // The quota kept the small tenant's 4 newest keys (900, 800, 700, 600).
  CHECK(h.cache_state("small", "m").summary().total_prefixes() == 4);
  for (std::uint64_t k = 0; k < 1000; k += 100) {
    const auto r = h.lookup(exact_req("small", "m", "vllm", k, 16));
    CHECK((r.reason_code() == "PREFIX_MATCH") == (k >= 600));
  }
  CHECK(h.cache_state("big", "m").summary().total_prefixes() == 1000);
  CHECK(h.event(pb::CacheEvent::ALL_CLEARED, "small", "m", "r1") == 4);
  CHECK(h.cache_state("small", "m").summary().total_prefixes() == 0);
  CHECK(h.cache_state("big", "m").summary().total_prefixes() == 1000);
  CHECK(h.shard->entry_count() == 1000);
}
