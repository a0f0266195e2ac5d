// Per-tenant key lists (docs/index.md "Layout and memory"): ALL_CLEARED and
// the quota answer exactly the same whether a tenant walks its list (ids of
// removed keys, of keys reused by another tenant and duplicates included) or,
// past its list's size, one pass over the shard's key slots.

#include <doctest/doctest.h>

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "helpers.hh"

using namespace ic::index;
using namespace ic::index::test;

namespace {
// Keys [from, to) of (tenant, m, vllm) for `replica`, key k seen at kNow + k.
void add_keys(Harness& h, const std::string& tenant, const std::string& replica, std::uint64_t from,
              std::uint64_t to) {
  for (std::uint64_t k = from; k < to; ++k)
    h.ingest(
        exact_update(tenant, "m", "vllm", replica, kNow + static_cast<std::int64_t>(k), {{k, 16}}));
}

// PREFIX_EVICTED of `replica` for keys [from, to) of (tenant, m).
void evict_keys(Harness& h, const std::string& tenant, const std::string& replica,
                std::uint64_t from, std::uint64_t to) {
  for (std::uint64_t k = from; k < to; ++k)
    CHECK(h.event(pb::CacheEvent::PREFIX_EVICTED, tenant, "m", replica, hb(k)) == 1);
}

// Keys [from, to) of (tenant, m, vllm) held by `replica`.
struct KeyRange {
  const char* tenant;
  const char* replica;
  std::uint64_t from, to;
};

// add_keys of each range, in order.
void add_keys(Harness& h, std::initializer_list<KeyRange> ranges) {
  for (const KeyRange& r : ranges) add_keys(h, r.tenant, r.replica, r.from, r.to);
}

bool held(Harness& h, const std::string& tenant, std::uint64_t k) {
  return h.lookup(exact_req(tenant, "m", "vllm", k, 16)).reason_code() == "PREFIX_MATCH";
}

std::int64_t prefixes(Harness& h, const std::string& tenant) {
  return h.cache_state(tenant, "m").summary().total_prefixes();
}

const char* kPolicies = R"({"version":7,"policies":[{"namespace":"a","minimumMatchedTokens":0,
  "routingFloorScore":0},{"namespace":"big","minimumMatchedTokens":0,"routingFloorScore":0}]})";

// Caps `tenant` at `entries` keys (its policy alone, floors 0); the ingest of
// `key` by `replica` at `ts` that follows makes the shard enforce the quota.
void apply_quota(Harness& h, const std::string& tenant, int entries, const std::string& replica,
                 std::int64_t ts, std::uint64_t key) {
  h.policy(R"({"version":7,"policies":[{"namespace":")" + tenant +
           R"(","minimumMatchedTokens":0,"routingFloorScore":0}],"tenants":[{"tenantID":")" +
           tenant + R"(","maxIndexEntries":)" + std::to_string(entries) + "}]}");
  h.ingest(exact_update(tenant, "m", "vllm", replica, ts, {{key, 16}}));
}

// The quota dropped `tenant`'s oldest keys: `first` is held, the key before it is gone.
void check_oldest_held(Harness& h, const std::string& tenant, std::uint64_t first) {
  CAPTURE(first);
  CHECK(!held(h, tenant, first - 1));
  CHECK(held(h, tenant, first));
}
}  // namespace

TEST_CASE("a listed tenant's stale ids: keys reused by another tenant are not its own") {
  Harness h;
  h.policy(kPolicies);
  add_keys(h, {{"a", "r1", 0, 20}, {"a", "r2", 50, 51}});
  // Ten of a's keys go; b's new keys take their ids (reused last-in first-out).
  evict_keys(h, "a", "r1", 0, 10);
  add_keys(h, "b", "r1", 100, 110);
  CHECK(h.shard->key_count() == 21);
  CHECK(h.event(pb::CacheEvent::ALL_CLEARED, "a", "m", "r1") == 10);
  CHECK(prefixes(h, "a") == 1);
  CHECK(prefixes(h, "b") == 10);
  // A repeated ALL_CLEARED finds nothing to remove.
  CHECK(h.event(pb::CacheEvent::ALL_CLEARED, "b", "m", "r2") == 0);
  CHECK(h.event(pb::CacheEvent::ALL_CLEARED, "b", "m", "r1") == 10);
  CHECK(h.event(pb::CacheEvent::ALL_CLEARED, "b", "m", "r1") == 0);
  CHECK(h.shard->key_count() == 1);
}

TEST_CASE("a listed tenant's duplicate ids: a key removed and created again counts once") {
  Harness h;
  h.policy(kPolicies);
  add_keys(h, {{"a", "r1", 0, 10}, {"a", "r2", 0, 2}});  // keys 0 and 1 held by two replicas
  // Keys 5..9 go and come back under the same ids, newer than the others.
  evict_keys(h, "a", "r1", 5, 10);
  for (std::uint64_t k = 5; k < 10; ++k)
    h.ingest(exact_update("a", "m", "vllm", "r1", kNow + 1000, {{k, 16}}));
  CHECK(prefixes(h, "a") == 10);
  // The quota (8 keys) drops the two oldest once each: keys 0 and 1 (both replicas).
  apply_quota(h, "a", 8, "r1", kNow + 2000, 5);
  CHECK(prefixes(h, "a") == 8);
  for (std::uint64_t k = 0; k < 10; ++k) CHECK(held(h, "a", k) == (k >= 2));
  CHECK(h.shard->entry_count() == 8);
  CHECK(h.event(pb::CacheEvent::ALL_CLEARED, "a", "m", "r1") == 8);
  CHECK(h.shard->entry_count() == 0);
}

TEST_CASE("a tenant past its list (over 4,096 keys) walks the shard's keys, then lists again") {
  Harness h;
  h.policy(kPolicies);
  add_keys(
      h, {{"a", "r1", 0, 10}, {"big", "r1", 0, 5000}, {"big", "r2", 0, 100}, {"a", "r1", 10, 20}});
  CHECK(h.shard->key_count() == 5020);
  // The quota of the large tenant: its 200 oldest keys go, the small tenant's stay.
  apply_quota(h, "big", 4800, "r1", kNow + 10'000, 4999);
  CHECK(prefixes(h, "big") == 4800);
  check_oldest_held(h, "big", 200);
  CHECK(prefixes(h, "a") == 20);
  // ALL_CLEARED of each: exact counts, the other tenant untouched.
  CHECK(h.event(pb::CacheEvent::ALL_CLEARED, "big", "m", "r2") == 0);
  CHECK(h.event(pb::CacheEvent::ALL_CLEARED, "big", "m", "r1") == 4800);
  CHECK(prefixes(h, "a") == 20);
  CHECK(h.event(pb::CacheEvent::ALL_CLEARED, "a", "m", "r1") == 20);
  CHECK(h.shard->key_count() == 0);
  // The large tenant shrank to nothing and starts over; past its list again,
  // the quota holds it at 4,800 keys.
  add_keys(h, {{"big", "r1", 0, 4}, {"a", "r1", 0, 4}, {"big", "r1", 4, 4900}});
  CHECK(prefixes(h, "big") == 4800);
  check_oldest_held(h, "big", 100);
  // The quota falls to 100 keys: 4,700 go; the next walk (ALL_CLEARED of r2)
  // lists the tenant again, and its new keys join that list.
  apply_quota(h, "big", 100, "r2", kNow + 20'000, 4899);
  CHECK(prefixes(h, "big") == 100);
  check_oldest_held(h, "big", 4800);
  CHECK(h.event(pb::CacheEvent::ALL_CLEARED, "big", "m", "r2") == 1);
  add_keys(h, "big", "r1", 5000, 5050);
  CHECK(prefixes(h, "big") == 100);
  check_oldest_held(h, "big", 4850);
  CHECK(held(h, "big", 5049));
  CHECK(h.event(pb::CacheEvent::ALL_CLEARED, "big", "m", "r1") == 100);
  CHECK(h.event(pb::CacheEvent::ALL_CLEARED, "a", "m", "r1") == 4);
  CHECK(h.shard->key_count() == 0);
}
