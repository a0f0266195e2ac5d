#include "sharding/index_wire.hh"

#include <span>

namespace ic::sharding::wire {
namespace {

// Views of a repeated bytes field, appended to `out`.
void append_views(const google::protobuf::RepeatedPtrField<std::string>& field,
                  std::vector<std::string_view>& out) {
  for (const std::string& s : field) out.emplace_back(s);
}

template <typename T>
std::span<const T> span_of(const google::protobuf::RepeatedField<T>& field) {
  return {field.data(), static_cast<std::size_t>(field.size())};
}

static_assert(static_cast<int>(index::EventType::kPrefixAdded) == pb::CacheEvent::PREFIX_ADDED);
static_assert(static_cast<int>(index::EventType::kPrefixEvicted) == pb::CacheEvent::PREFIX_EVICTED);
static_assert(static_cast<int>(index::EventType::kReplicaUpdated) ==
              pb::CacheEvent::REPLICA_UPDATED);
static_assert(static_cast<int>(index::EventType::kAllCleared) == pb::CacheEvent::ALL_CLEARED);

// The scope names a LookupQuery and an Update share with their messages.
template <typename Message, typename Out>
void copy_scope(const Message& m, Out& out) {
  out.tenant_id = m.tenant_id();
  out.model_id = m.model_id();
  out.hash_scheme = m.hash_scheme();
  out.adapter_id = m.adapter_id();
}

// The translation buffers of this thread (one per core).
struct Buffers {
  std::vector<std::string_view> hashes;
  index::LookupResult result;
  UpdateBuffers update;
  index::CacheState state;
};

Buffers& buffers() {
  thread_local Buffers b;
  return b;
}

// A buffer grown past this many elements by one large request is freed after
// it, not kept: a 1 MB ReportCacheState of empty prefixes grows `prefixes` to
// 40 MB, which a warm core would otherwise hold until it exits
// (docs/hostile-peers.md "Reused state"). Ordinary requests stay far below.
constexpr std::size_t kMaxKeptElements = 4096;

template <typename T>
void release_if_large(std::vector<T>& v) {
  if (v.capacity() > kMaxKeptElements) std::vector<T>().swap(v);
}

}  // namespace

index::LookupQuery to_query(const pb::LookupRouteRequest& request,
                            std::vector<std::string_view>& hashes) {
  hashes.clear();
  append_views(request.block_hashes(), hashes);
  index::LookupQuery q;
  copy_scope(request, q);
  q.prefix_hash = request.prefix_hash();
  q.prefix_token_count = request.prefix_token_count();
  q.block_hashes = hashes;
  q.block_token_counts = span_of(request.block_token_counts());
  q.token_ids = span_of(request.token_ids());
  q.has_prompt_text = !request.prompt_text().empty();
  q.slo_ttft_ms = request.slo().ttft_ms();
  return q;
}

void to_response(const index::LookupResult& result, pb::LookupRouteResponse* out) {
  out->Clear();
  // assign() copies into the field's string: no temporary std::string.
  for (const index::ReplicaScore& s : result.replica_scores) {
    pb::ReplicaScore* rs = out->add_replica_scores();
    rs->mutable_replica_id()->assign(s.replica_id);
    rs->set_score(s.score);
    rs->set_matched_tokens(s.matched_tokens);
    rs->set_estimated_cache_hit_prob(s.estimated_cache_hit_prob);
    rs->set_tier(static_cast<pb::CacheTier>(s.tier));
  }
  out->mutable_reason_code()->assign(result.reason_code);
  out->set_lookup_latency_us(result.lookup_latency_us);
  if (!result.token_ids.empty())
    out->mutable_token_ids()->Add(result.token_ids.begin(), result.token_ids.end());
  if (!result.adapter_id.empty()) out->mutable_adapter_id()->assign(result.adapter_id);
}

index::Update to_update(const pb::CacheStateUpdate& update, UpdateBuffers& buffers) {
  buffers.prefixes.clear();
  buffers.block_hashes.clear();
  for (const pb::PrefixEntry& p : update.prefixes())
    append_views(p.block_hashes(), buffers.block_hashes);
  std::size_t at = 0;  // spans are taken once block_hashes no longer moves
  for (const pb::PrefixEntry& p : update.prefixes()) {
    index::PrefixReport& r = buffers.prefixes.emplace_back();
    const auto n = static_cast<std::size_t>(p.block_hashes_size());
    r.prefix_hash = p.prefix_hash();
    r.token_count = p.token_count();
    r.block_hashes = std::span<const std::string_view>(buffers.block_hashes).subspan(at, n);
    r.block_token_counts = span_of(p.block_token_counts());
    r.tier = static_cast<std::int32_t>(p.tier());
    r.adapter_id = p.adapter_id();
    at += n;
  }
  index::Update u;
  copy_scope(update, u);
  u.replica_id = update.replica_id();
  u.timestamp_us = update.timestamp_us();
  u.prefixes = buffers.prefixes;
  if (update.has_stats()) {
    const pb::ReplicaStats& s = update.stats();
    u.stats = index::ReplicaStats{s.cache_memory_bytes(),
                                  s.hit_rate(),
                                  s.pressure(),
                                  s.t2_hit_tokens(),
                                  s.t2_query_tokens(),
                                  s.prefix_cache_hit_tokens(),
                                  s.prefix_cache_query_tokens()};
  }
  return u;
}

index::Event to_event(const pb::CacheEvent& event) {
  index::Event e;
  // EventType numbers are CacheEvent.Type's; the rest become kUnspecified.
  const int type = event.type();
  e.type = type >= pb::CacheEvent::PREFIX_ADDED && type <= pb::CacheEvent::ALL_CLEARED
               ? static_cast<index::EventType>(type)
               : index::EventType::kUnspecified;
  e.tenant_id = event.tenant_id();
  e.model_id = event.model_id();
  e.replica_id = event.replica_id();
  e.prefix_hash = event.prefix_hash();
  e.adapter_id = event.adapter_id();
  e.timestamp_us = event.timestamp_us();
  return e;
}

index::CacheStateQuery to_query(const pb::GetCacheStateRequest& request) {
  return index::CacheStateQuery{request.tenant_id(), request.model_id()};
}

void to_response(const index::CacheState& state, pb::GetCacheStateResponse* out) {
  out->Clear();
  pb::CacheSummary* summary = out->mutable_summary();
  summary->set_total_prefixes(state.total_prefixes);
  summary->set_hot_prefixes(state.hot_prefixes);
  for (const index::StatsView& v : state.replicas) {
    pb::ReplicaStats* rs = out->add_replicas();
    rs->mutable_replica_id()->assign(v.replica);
    rs->set_cache_memory_bytes(v.cache_memory_bytes);
    rs->set_hit_rate(static_cast<float>(v.hit_rate));
    rs->set_pressure(static_cast<float>(v.pressure));
    rs->set_t2_hit_tokens(v.t2_hit_tokens);
    rs->set_t2_query_tokens(v.t2_query_tokens);
    rs->set_prefix_cache_hit_tokens(v.prefix_cache_hit_tokens);
    rs->set_prefix_cache_query_tokens(v.prefix_cache_query_tokens);
  }
}

void lookup_route(index::Shard& shard, const pb::LookupRouteRequest& request,
                  const index::LookupContext& ctx, pb::LookupRouteResponse* out) {
  Buffers& b = buffers();
  shard.lookup(to_query(request, b.hashes), ctx, &b.result);
  to_response(b.result, out);
  release_if_large(b.hashes);
}

void lookup_route(index::Shard& shard, const LookupRequestView& request,
                  const index::LookupContext& ctx, pb::LookupRouteResponse* out) {
  Buffers& b = buffers();
  shard.lookup(to_query(request), ctx, &b.result);
  to_response(b.result, out);
}

index::IngestResult ingest(index::Shard& shard, const pb::CacheStateUpdate& update,
                           std::int64_t now_wall_us) {
  UpdateBuffers& b = buffers().update;
  const index::IngestResult result = shard.ingest(to_update(update, b), now_wall_us);
  release_if_large(b.prefixes);
  release_if_large(b.block_hashes);
  return result;
}

std::size_t kept_update_buffer_elements() {
  const UpdateBuffers& b = buffers().update;
  return b.prefixes.capacity() + b.block_hashes.capacity();
}

std::size_t apply_event(index::Shard& shard, const pb::CacheEvent& event,
                        std::int64_t now_wall_us) {
  return shard.apply_event(to_event(event), now_wall_us);
}

void get_cache_state(const index::Shard& shard, const pb::GetCacheStateRequest& request,
                     pb::GetCacheStateResponse* out) {
  index::CacheState& state = buffers().state;
  shard.get_cache_state(to_query(request), &state);
  to_response(state, out);
}

}  // namespace ic::sharding::wire
