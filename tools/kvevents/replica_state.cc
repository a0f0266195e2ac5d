#include "kvevents/replica_state.hh"

#include <xxhash.h>

#include <limits>
#include <span>

#include "base/log.hh"
#include "fingerprint/fingerprint.hh"

namespace ic::tools::kvevents {

Tier tier_of_medium(const std::optional<std::string>& medium) {
  if (!medium) return Tier::t1;
  const std::string& m = *medium;
  if (m.rfind("CPU", 0) == 0 || m == "STORAGE" || m == "FS" || m == "OBJ" || m == "DISK") {
    return Tier::t2;
  }
  return Tier::t1;
}

std::uint64_t salt_root(std::string_view salt) {
  return XXH3_64bits_withSeed(salt.data(), salt.size(), fingerprint::kSeed);
}

ReplicaState::ReplicaState(const StateOptions& options, Counters& counters)
    : options_(options), counters_(counters) {
  adapters_.emplace_back();  // index 0: the default partition ""
  adapter_ids_.emplace("", 0);
}

bool ReplicaState::adapter_of(const BlockStored& e, std::string* adapter) const {
  if (e.lora_name && !e.lora_name->empty()) {
    *adapter = *e.lora_name;
    return true;
  }
  if (!e.lora_id) {
    adapter->clear();
    return true;
  }
  // A load-order id means different adapters on different replicas: only the operator's map
  // gives it a stable name; unmapped ids fail closed.
  const auto it = options_.lora_names.find(*e.lora_id);
  if (it == options_.lora_names.end()) return false;
  *adapter = it->second;
  return true;
}

std::uint32_t ReplicaState::intern(const std::string& adapter) {
  const auto [it, fresh] =
      adapter_ids_.emplace(adapter, static_cast<std::uint32_t>(adapters_.size()));
  if (fresh) adapters_.push_back(adapter);
  return it->second;
}

void ReplicaState::stored(const BlockStored& e, ChangeSink& sink) {
  counters_.add(Metric::events_stored);
  if (e.group_idx != 0) {
    counters_.add(Metric::group_skipped);
    return;
  }
  if (e.block_size <= 0 || e.block_size > (1 << 20)) {
    counters_.add(Metric::dropped_bad_block_size);
    return;
  }
  std::string adapter;
  if (!adapter_of(e, &adapter)) {
    counters_.add(Metric::dropped_lora_unmapped);
    return;
  }
  const std::size_t full = e.token_ids.size() / static_cast<std::size_t>(e.block_size);
  if (full != e.block_hashes.size()) {
    counters_.add(Metric::dropped_block_count_mismatch);
    return;
  }
  std::optional<std::uint64_t> parent;
  std::int64_t tokens = 0;
  if (e.parent_block_hash) {
    // A parent we never saw (joined mid-stream, or its event was dropped): its prefix is unknown,
    // and rooting the suffix at 0 tokens would claim a prefix the replica does not hold.
    const auto it = blocks_.find(*e.parent_block_hash);
    if (it == blocks_.end()) {
      counters_.add(Metric::dropped_unknown_parent);
      return;
    }
    parent = it->second.prefix;
    tokens = it->second.tokens;
  } else if (e.cache_salt && !e.cache_salt->empty()) {
    parent = salt_root(*e.cache_salt);
  }
  if (e.block_size != options_.engine_block_size) {
    counters_.add(Metric::block_size_mismatch);
    if (!block_size_logged_) {
      block_size_logged_ = true;
      base::log(base::LogLevel::warn, "engine block size differs from --engine-block-size",
                {{"engine_block_size", std::to_string(e.block_size)},
                 {"server_block_size", std::to_string(options_.engine_block_size)},
                 {"effect", "token_ids lookups cannot match these blocks"}});
    }
  }
  const auto prefixes = fingerprint::prefix_hashes(std::span(e.token_ids),
                                                   static_cast<std::int32_t>(e.block_size), parent);
  const std::uint32_t adapter_id = intern(adapter);
  const Tier tier = tier_of_medium(e.medium);
  for (std::size_t i = 0; i < prefixes.size(); ++i) {
    tokens += e.block_size;
    if (tokens > std::numeric_limits<std::int32_t>::max()) break;
    Block fresh;
    fresh.prefix = prefixes[i];
    fresh.tokens = static_cast<std::int32_t>(tokens);
    fresh.adapter = adapter_id;
    store_block(e.block_hashes[i], fresh, tier, sink);
  }
  counters_.add(Metric::blocks_stored, prefixes.size());
}

Tier ReplicaState::tier_of(const Block& b) { return b.copies_t1 > 0 ? Tier::t1 : Tier::t2; }

void ReplicaState::store_block(std::uint64_t engine_hash, const Block& fresh, Tier tier,
                               ChangeSink& sink) {
  auto [it, inserted] = blocks_.try_emplace(engine_hash, fresh);
  Block& b = it->second;
  const bool held_before = b.copies_t1 + b.copies_t2 > 0 || b.kept_at_t2;
  const bool held_t1_before = b.copies_t1 > 0;
  if (tier == Tier::t1) {
    ++b.copies_t1;
  } else {
    ++b.copies_t2;
  }
  if (!inserted && (tier == Tier::t1 ? b.copies_t1 : b.copies_t2) > 1) {
    counters_.add(Metric::duplicate_blocks);
  }
  // Tell the server only when the replica's holding changes: new, or moved up to T1.
  if (!held_before || (tier == Tier::t1 && !held_t1_before)) {
    sink.add(b.prefix, b.tokens, tier_of(b), adapters_[b.adapter]);
  }
  b.kept_at_t2 = false;
}

void ReplicaState::removed(const BlockRemoved& e, ChangeSink& sink) {
  counters_.add(Metric::events_removed);
  if (e.group_idx != 0) {
    counters_.add(Metric::group_skipped);
    return;
  }
  const Tier tier = tier_of_medium(e.medium);
  for (std::uint64_t h : e.block_hashes) remove_block(h, tier, sink);
  counters_.add(Metric::blocks_removed, e.block_hashes.size());
}

void ReplicaState::remove_block(std::uint64_t engine_hash, Tier tier, ChangeSink& sink) {
  const auto it = blocks_.find(engine_hash);
  std::uint32_t* copies = nullptr;
  if (it != blocks_.end())
    copies = tier == Tier::t1 ? &it->second.copies_t1 : &it->second.copies_t2;
  if (copies == nullptr || *copies == 0) {
    counters_.add(Metric::unknown_removals);
    return;
  }
  Block& b = it->second;
  --*copies;
  if (b.copies_t1 + b.copies_t2 > 0) {
    // The T1 copies are gone but an offloaded copy remains: the server moves it to T2.
    if (tier == Tier::t1 && b.copies_t1 == 0)
      sink.add(b.prefix, b.tokens, Tier::t2, adapters_[b.adapter]);
    return;
  }
  if (options_.ignore_block_removed && tier == Tier::t1) {
    // An offload tier (e.g. LMCache) still holds what the engine evicted from HBM.
    b.kept_at_t2 = true;
    sink.add(b.prefix, b.tokens, Tier::t2, adapters_[b.adapter]);
    return;
  }
  sink.evict(b.prefix, adapters_[b.adapter]);
  blocks_.erase(it);
}

void ReplicaState::clear() { blocks_.clear(); }

std::vector<std::uint64_t> ReplicaState::engine_hashes() const {
  std::vector<std::uint64_t> out;
  out.reserve(blocks_.size());
  for (const auto& [hash, b] : blocks_) out.push_back(hash);
  return out;
}

bool ReplicaState::report(std::uint64_t engine_hash, ChangeSink& sink) const {
  const auto it = blocks_.find(engine_hash);
  if (it == blocks_.end()) return false;
  const Block& b = it->second;
  sink.add(b.prefix, b.tokens, tier_of(b), adapters_[b.adapter]);
  return true;
}

void ReplicaState::snapshot(ChangeSink& sink) const {
  for (const auto& [hash, b] : blocks_)
    sink.add(b.prefix, b.tokens, tier_of(b), adapters_[b.adapter]);
}

}  // namespace ic::tools::kvevents
