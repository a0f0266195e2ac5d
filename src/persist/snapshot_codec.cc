// Shard export ⇄ StateChunk (docs/persistence.md "What is saved").

#include "persist/snapshot_codec.hh"

#include "index/partition.hh"
#include "sharding/index_wire.hh"

namespace ic::persist {

namespace pb = sharding::wire::pb;

namespace {

bool same_group(const pb::CacheStateUpdate& u, const index::EntryView& v) {
  return u.timestamp_us() == v.last_seen_us && u.replica_id() == v.replica &&
         u.tenant_id() == v.tenant && u.model_id() == v.model && u.hash_scheme() == v.hash_scheme;
}

// The scope every saved record carries: tenant, model, replica and a wall-clock
// time (µs). `Message` is a CacheStateUpdate or a CacheEvent; `View` an
// EntryView or a StatsView.
template <class Message, class View>
void set_scope(Message& m, const View& v, std::int64_t timestamp_us) {
  m.set_tenant_id(v.tenant.data(), v.tenant.size());
  m.set_model_id(v.model.data(), v.model.size());
  m.set_replica_id(v.replica.data(), v.replica.size());
  m.set_timestamp_us(timestamp_us);
}

}  // namespace

void ChunkBuilder::add_entry(const index::EntryView& v) {
  if (current_ == nullptr || !same_group(*current_, v)) {
    current_ = chunk_.add_updates();
    set_scope(*current_, v, v.last_seen_us);
    current_->set_hash_scheme(v.hash_scheme.data(), v.hash_scheme.size());
  }
  pb::PrefixEntry* p = current_->add_prefixes();
  p->set_prefix_hash(v.prefix_hash.data(), v.prefix_hash.size());
  p->set_token_count(v.token_count);
  p->set_tier(static_cast<pb::CacheTier>(v.tier));
  if (!v.adapter.empty()) p->set_adapter_id(v.adapter.data(), v.adapter.size());
  ++entries_;
}

void ChunkBuilder::add_stats(const index::StatsView& v) {
  current_ = nullptr;  // a stats update never takes entries
  pb::CacheStateUpdate* u = chunk_.add_updates();
  set_scope(*u, v, v.stats_reported_us);
  pb::ReplicaStats* s = u->mutable_stats();
  s->set_replica_id(v.replica.data(), v.replica.size());
  s->set_cache_memory_bytes(v.cache_memory_bytes);
  s->set_hit_rate(static_cast<float>(v.hit_rate));  // stored from a float: exact
  s->set_pressure(static_cast<float>(v.pressure));
  s->set_t2_hit_tokens(v.t2_hit_tokens);
  s->set_t2_query_tokens(v.t2_query_tokens);
  s->set_prefix_cache_hit_tokens(v.prefix_cache_hit_tokens);
  s->set_prefix_cache_query_tokens(v.prefix_cache_query_tokens);
  if (v.last_seen_us != v.stats_reported_us) {
    pb::CacheEvent* e = chunk_.add_liveness();
    e->set_type(pb::CacheEvent::REPLICA_UPDATED);
    set_scope(*e, v, v.last_seen_us);
  }
}

std::string ChunkBuilder::take() {
  std::string out = chunk_.SerializeAsString();
  chunk_.Clear();
  current_ = nullptr;
  entries_ = 0;
  return out;
}

bool restore_chunk(std::string_view serialized, std::span<index::Shard* const> shards,
                   std::int64_t now_wall_us, RestoreCounts* counts) {
  state_pb::StateChunk chunk;
  if (!chunk.ParseFromArray(serialized.data(), static_cast<int>(serialized.size()))) return false;
  restore_chunk(chunk, shards, now_wall_us, counts);
  return true;
}

void restore_owned(const state_pb::StateChunk& chunk, index::Shard& shard, unsigned core,
                   unsigned cores, std::int64_t now_wall_us, RestoreCounts* counts) {
  for (const pb::CacheStateUpdate& u : chunk.updates()) {
    if (index::owner_core(u.tenant_id(), cores) != core) continue;
    sharding::wire::ingest(shard, u, now_wall_us);
    counts->entries += u.prefixes_size();
    counts->stats += u.has_stats() ? 1 : 0;
  }
  for (const pb::CacheEvent& e : chunk.liveness()) {
    if (index::owner_core(e.tenant_id(), cores) == core)
      sharding::wire::apply_event(shard, e, now_wall_us);
  }
}

void restore_chunk(const state_pb::StateChunk& chunk, std::span<index::Shard* const> shards,
                   std::int64_t now_wall_us, RestoreCounts* counts) {
  const auto cores = static_cast<unsigned>(shards.size());
  for (unsigned core = 0; core < cores; ++core)
    restore_owned(chunk, *shards[core], core, cores, now_wall_us, counts);
  ++counts->chunks;
}

}  // namespace ic::persist
