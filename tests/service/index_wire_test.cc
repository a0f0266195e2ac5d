// The protobuf ⇄ index translation (sharding/index_wire.hh), field by field:
// requests become views into the message, answers carry every field.

#include "sharding/index_wire.hh"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace {

namespace pb = ::inferencecache::v1alpha1;
namespace wire = ic::sharding::wire;
using ic::index::EventType;

TEST_CASE("index_wire: LookupRouteRequest becomes a LookupQuery viewing the request") {
  pb::LookupRouteRequest r;
  r.set_tenant_id("team-a");
  r.set_model_id("llama");
  r.set_hash_scheme("vllm");
  r.set_adapter_id("lora-1");
  r.set_prefix_hash(std::string("\x00\x01\x02", 3));
  r.set_prefix_token_count(48);
  r.add_block_hashes("h0-bytes");
  r.add_block_hashes("h1-bytes");
  r.add_block_token_counts(16);
  r.add_block_token_counts(32);
  r.add_block_token_counts(7);  // malformed on purpose: sizes are kept as sent
  r.add_token_ids(5);
  r.add_token_ids(4000000000u);
  r.set_prompt_text("hello");
  r.mutable_slo()->set_ttft_ms(150);
  std::vector<std::string_view> hashes{"stale"};
  const ic::index::LookupQuery q = wire::to_query(r, hashes);
  CHECK(q.tenant_id == "team-a");
  CHECK(q.model_id == "llama");
  CHECK(q.hash_scheme == "vllm");
  CHECK(q.adapter_id == "lora-1");
  CHECK(q.prefix_hash == std::string_view("\x00\x01\x02", 3));
  CHECK(q.prefix_token_count == 48);
  REQUIRE(q.block_hashes.size() == 2);
  CHECK(q.block_hashes[0] == "h0-bytes");
  CHECK(q.block_hashes[1] == "h1-bytes");
  CHECK(q.block_hashes[0].data() == r.block_hashes(0).data());  // a view, not a copy
  CHECK(q.block_hashes.data() == hashes.data());
  REQUIRE(q.block_token_counts.size() == 3);
  CHECK(q.block_token_counts[0] == 16);
  CHECK(q.block_token_counts[1] == 32);
  CHECK(q.block_token_counts[2] == 7);
  REQUIRE(q.token_ids.size() == 2);
  CHECK(q.token_ids[0] == 5u);
  CHECK(q.token_ids[1] == 4000000000u);
  CHECK(q.token_ids.data() == r.token_ids().data());
  CHECK(q.has_prompt_text);
  CHECK(q.slo_ttft_ms == 150);

  const ic::index::LookupQuery empty = wire::to_query(pb::LookupRouteRequest{}, hashes);
  CHECK(empty.tenant_id.empty());
  CHECK(empty.prefix_hash.empty());
  CHECK(empty.prefix_token_count == 0);
  CHECK(empty.block_hashes.empty());
  CHECK(empty.block_token_counts.empty());
  CHECK(empty.token_ids.empty());
  CHECK_FALSE(empty.has_prompt_text);
  CHECK(empty.slo_ttft_ms == 0);
  CHECK(hashes.empty());
}

TEST_CASE("index_wire: LookupResult becomes the LookupRouteResponse, every field") {
  const std::vector<std::uint32_t> tokens{7, 8, 9};
  ic::index::LookupResult res;
  res.reason_code = ic::index::reason::kPrefixMatch;
  res.replica_scores.push_back({"replica-with-a-long-name-0001", 61.5f, 64, 0.75f, 2});
  res.replica_scores.push_back({"r2", 0.25f, -3, 1.0f, 0});
  res.adapter_id = "lora-x";
  res.token_ids = tokens;
  res.lookup_latency_us = 42;
  pb::LookupRouteResponse out;
  out.set_reason_code("OLD");
  out.add_replica_scores()->set_replica_id("old");
  out.add_token_ids(1);
  wire::to_response(res, &out);
  CHECK(out.reason_code() == "PREFIX_MATCH");
  CHECK(out.lookup_latency_us() == 42);
  CHECK(out.adapter_id() == "lora-x");
  REQUIRE(out.token_ids_size() == 3);
  CHECK(out.token_ids(0) == 7u);
  CHECK(out.token_ids(1) == 8u);
  CHECK(out.token_ids(2) == 9u);
  REQUIRE(out.replica_scores_size() == 2);
  CHECK(out.replica_scores(0).replica_id() == "replica-with-a-long-name-0001");
  CHECK(out.replica_scores(0).score() == 61.5f);
  CHECK(out.replica_scores(0).matched_tokens() == 64);
  CHECK(out.replica_scores(0).estimated_cache_hit_prob() == 0.75f);
  CHECK(out.replica_scores(0).tier() == pb::CACHE_TIER_T2);
  CHECK(out.replica_scores(1).replica_id() == "r2");
  CHECK(out.replica_scores(1).score() == 0.25f);
  CHECK(out.replica_scores(1).matched_tokens() == -3);
  CHECK(out.replica_scores(1).estimated_cache_hit_prob() == 1.0f);
  CHECK(out.replica_scores(1).tier() == pb::CACHE_TIER_UNSPECIFIED);

  // No echo: the fields stay at their defaults (not serialized).
  ic::index::LookupResult bare;
  bare.reason_code = ic::index::reason::kTimeout;
  wire::to_response(bare, &out);
  CHECK(out.reason_code() == "TIMEOUT");
  CHECK(out.replica_scores_size() == 0);
  CHECK(out.token_ids_size() == 0);
  CHECK(out.adapter_id().empty());
  CHECK(out.lookup_latency_us() == 0);
  CHECK(out.ByteSizeLong() == 9);  // field 2, length 7, "TIMEOUT"
}

TEST_CASE("index_wire: CacheStateUpdate becomes an Update with per-prefix slices") {
  pb::CacheStateUpdate u;
  u.set_tenant_id("t");
  u.set_model_id("m");
  u.set_replica_id("r");
  u.set_hash_scheme("vllm");
  u.set_adapter_id("base-lora");
  u.set_timestamp_us(1'700'000'000'000'123);
  pb::PrefixEntry* chain = u.add_prefixes();
  chain->add_block_hashes("b0");
  chain->add_block_hashes("b1");
  chain->add_block_token_counts(16);
  chain->add_block_token_counts(16);
  chain->set_prefix_hash("whole");
  chain->set_tier(pb::CACHE_TIER_T3);
  pb::PrefixEntry* exact = u.add_prefixes();
  exact->set_prefix_hash("legacy");
  exact->set_token_count(128);
  exact->set_adapter_id("own-lora");
  exact->set_tier(static_cast<pb::CacheTier>(7));  // unknown: kept as sent
  pb::PrefixEntry* third = u.add_prefixes();
  third->add_block_hashes("c0");
  third->add_block_token_counts(8);
  third->add_block_token_counts(8);  // malformed: the index drops it
  third->set_tier(static_cast<pb::CacheTier>(-1));

  wire::UpdateBuffers buf;
  ic::index::Update x = wire::to_update(u, buf);
  CHECK(x.tenant_id == "t");
  CHECK(x.model_id == "m");
  CHECK(x.replica_id == "r");
  CHECK(x.hash_scheme == "vllm");
  CHECK(x.adapter_id == "base-lora");
  CHECK(x.timestamp_us == 1'700'000'000'000'123);
  CHECK_FALSE(x.stats.has_value());
  REQUIRE(x.prefixes.size() == 3);
  const ic::index::PrefixReport& p0 = x.prefixes[0];
  REQUIRE(p0.block_hashes.size() == 2);
  CHECK(p0.block_hashes[0] == "b0");
  CHECK(p0.block_hashes[1] == "b1");
  REQUIRE(p0.block_token_counts.size() == 2);
  CHECK(p0.block_token_counts[0] == 16);
  CHECK(p0.block_token_counts[1] == 16);
  CHECK(p0.prefix_hash == "whole");
  CHECK(p0.token_count == 0);
  CHECK(p0.tier == 3);
  CHECK(p0.adapter_id.empty());
  const ic::index::PrefixReport& p1 = x.prefixes[1];
  CHECK(p1.block_hashes.empty());
  CHECK(p1.block_token_counts.empty());
  CHECK(p1.prefix_hash == "legacy");
  CHECK(p1.token_count == 128);
  CHECK(p1.tier == 7);
  CHECK(p1.adapter_id == "own-lora");
  const ic::index::PrefixReport& p2 = x.prefixes[2];
  REQUIRE(p2.block_hashes.size() == 1);
  CHECK(p2.block_hashes[0] == "c0");
  CHECK(p2.block_token_counts.size() == 2);
  CHECK(p2.tier == -1);

  pb::ReplicaStats* s = u.mutable_stats();
  s->set_cache_memory_bytes(1 << 30);
  s->set_hit_rate(0.5f);
  s->set_pressure(0.25f);
  s->set_t2_hit_tokens(11);
  s->set_t2_query_tokens(22);
  s->set_prefix_cache_hit_tokens(33);
  s->set_prefix_cache_query_tokens(44);
  u.clear_prefixes();
  x = wire::to_update(u, buf);
  CHECK(x.prefixes.empty());
  REQUIRE(x.stats.has_value());
  CHECK(x.stats->cache_memory_bytes == (1 << 30));
  CHECK(x.stats->hit_rate == 0.5);
  CHECK(x.stats->pressure == 0.25);
  CHECK(x.stats->t2_hit_tokens == 11);
  CHECK(x.stats->t2_query_tokens == 22);
  CHECK(x.stats->prefix_cache_hit_tokens == 33);
  CHECK(x.stats->prefix_cache_query_tokens == 44);
}

TEST_CASE("index_wire: CacheEvent becomes an Event; unknown types are no-ops") {
  pb::CacheEvent e;
  e.set_tenant_id("t");
  e.set_model_id("m");
  e.set_replica_id("r");
  e.set_prefix_hash("key");
  e.set_adapter_id("lora");
  e.set_timestamp_us(99);
  const std::vector<std::pair<int, EventType>> types{
      {pb::CacheEvent::TYPE_UNSPECIFIED, EventType::kUnspecified},
      {pb::CacheEvent::PREFIX_ADDED, EventType::kPrefixAdded},
      {pb::CacheEvent::PREFIX_EVICTED, EventType::kPrefixEvicted},
      {pb::CacheEvent::REPLICA_UPDATED, EventType::kReplicaUpdated},
      {pb::CacheEvent::ALL_CLEARED, EventType::kAllCleared},
      {9, EventType::kUnspecified}};
  for (const auto& [wire_type, want] : types) {
    CAPTURE(wire_type);
    e.set_type(static_cast<pb::CacheEvent::Type>(wire_type));
    const ic::index::Event x = wire::to_event(e);
    CHECK(x.type == want);
    CHECK(x.tenant_id == "t");
    CHECK(x.model_id == "m");
    CHECK(x.replica_id == "r");
    CHECK(x.prefix_hash == "key");
    CHECK(x.adapter_id == "lora");
    CHECK(x.timestamp_us == 99);
  }
}

TEST_CASE("index_wire: GetCacheState query and response") {
  pb::GetCacheStateRequest r;
  r.set_tenant_id("t");
  r.set_model_id("m");
  const ic::index::CacheStateQuery q = wire::to_query(r);
  CHECK(q.tenant_id == "t");
  CHECK(q.model_id == "m");

  ic::index::CacheState state;
  state.total_prefixes = 12;
  state.hot_prefixes = 0;
  ic::index::StatsView v;
  v.tenant = "t";
  v.model = "m";
  v.replica = "r1";
  v.cache_memory_bytes = 4096;
  v.hit_rate = 0.5;
  v.pressure = 0.125;
  v.t2_hit_tokens = 3;
  v.t2_query_tokens = 4;
  v.prefix_cache_hit_tokens = 5;
  v.prefix_cache_query_tokens = 6;
  state.replicas.push_back(v);
  pb::GetCacheStateResponse out;
  out.add_replicas()->set_replica_id("old");
  wire::to_response(state, &out);
  // Every field, as the text format prints the set ones (client_version unset).
  CHECK(out.ShortDebugString() ==
        "replicas { replica_id: \"r1\" cache_memory_bytes: 4096 hit_rate: 0.5 pressure: 0.125 "
        "t2_hit_tokens: 3 t2_query_tokens: 4 prefix_cache_hit_tokens: 5 "
        "prefix_cache_query_tokens: 6 } summary { total_prefixes: 12 }");

  // An empty state still carries the summary (as GetCacheState always did).
  wire::to_response(ic::index::CacheState{}, &out);
  CHECK(out.has_summary());
  CHECK(out.summary().total_prefixes() == 0);
  CHECK(out.replicas_size() == 0);
}

}  // namespace

TEST_CASE("index_wire: a large ReportCacheState's translation buffers are freed after it") {
  ic::index::Shard shard(ic::index::IndexConfig{}, nullptr);
  pb::CacheStateUpdate small;
  small.set_tenant_id("t");
  small.set_model_id("m");
  small.set_replica_id("r");
  small.set_hash_scheme("vllm");
  pb::PrefixEntry* p = small.add_prefixes();
  p->add_block_hashes("b0");
  p->add_block_hashes("b1");
  pb::CacheStateUpdate large = small;
  for (int i = 0; i < 5000; ++i) large.add_prefixes()->add_block_hashes(std::to_string(i));

  wire::ingest(shard, large, 1'000'000);
  CHECK(wire::kept_update_buffer_elements() == 0);
  // From empty buffers: one prefix (capacity 1) and two block hashes (1, then 2).
  wire::ingest(shard, small, 1'000'001);
  CHECK(wire::kept_update_buffer_elements() == 3);
  wire::ingest(shard, small, 1'000'002);
  CHECK(wire::kept_update_buffer_elements() == 3);
  wire::ingest(shard, large, 1'000'003);
  CHECK(wire::kept_update_buffer_elements() == 0);
}
