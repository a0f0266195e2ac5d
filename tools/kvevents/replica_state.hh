// One replica's view of its engine's prefix cache (docs/kvevents.md "What reaches the server"):
// engine block hash → (content-fingerprint prefix hash, cumulative tokens, adapter, copies per
// tier). Turns decoded events into index changes: adds, evictions and tier moves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "kvevents/counters.hh"
#include "kvevents/event.hh"

namespace ic::tools::kvevents {

// Index tier of a copy (contract CacheTier values).
enum class Tier : int { t1 = 1, t2 = 2 };

// "GPU" or nil → T1; "CPU…", "STORAGE", "FS", "OBJ", "DISK" → T2; other accelerator names → T1.
Tier tier_of_medium(const std::optional<std::string>& medium);

// Root of a salted prompt: XXH3-64 (seed 1337) over the salt's bytes. The first block of a
// salted prompt chains onto it (docs/fingerprint.md's parent case), so an unsalted lookup can
// never compute the same key.
std::uint64_t salt_root(std::string_view salt);

// Where the state's changes go, in order.
class ChangeSink {
 public:
  virtual ~ChangeSink() = default;
  // The replica holds `prefix` (cumulative `tokens`) at `tier` in partition `adapter`.
  virtual void add(std::uint64_t prefix, std::int32_t tokens, Tier tier,
                   const std::string& adapter) = 0;
  // The replica no longer holds `prefix` in partition `adapter`.
  virtual void evict(std::uint64_t prefix, const std::string& adapter) = 0;
};

struct StateOptions {
  std::int64_t engine_block_size = 16;             // the server's --engine-block-size
  bool ignore_block_removed = false;               // last copy removed: keep at T2
  std::map<std::int64_t, std::string> lora_names;  // --lora-adapter-names
  std::size_t max_blocks = 1u << 20;               // tracked blocks before a reset
};

class ReplicaState {
 public:
  ReplicaState(const StateOptions& options, Counters& counters);

  void stored(const BlockStored& event, ChangeSink& sink);
  void removed(const BlockRemoved& event, ChangeSink& sink);
  // Forgets every block (AllBlocksCleared, resync). The caller tells the server.
  void clear();
  // Re-emits every tracked block at its current tier (after the server lost its index).
  void snapshot(ChangeSink& sink) const;
  // Engine hashes of every tracked block, for a refresh pass to walk in slices.
  std::vector<std::uint64_t> engine_hashes() const;
  // Re-emits block `engine_hash` at its current tier; false when it is no longer tracked.
  bool report(std::uint64_t engine_hash, ChangeSink& sink) const;
  // True when the last stored() found the state over max_blocks (the caller resyncs).
  bool over_capacity() const { return blocks_.size() > options_.max_blocks; }
  std::size_t size() const { return blocks_.size(); }

 private:
  struct Block {
    std::uint64_t prefix = 0;
    std::int32_t tokens = 0;
    std::uint32_t adapter = 0;  // index into adapters_
    std::uint32_t copies_t1 = 0;
    std::uint32_t copies_t2 = 0;
    bool kept_at_t2 = false;  // --ignore-block-removed kept it after its last copy went
  };

  // The adapter partition of `e`; false when the event must be dropped (unmapped lora_id).
  bool adapter_of(const BlockStored& e, std::string* adapter) const;
  std::uint32_t intern(const std::string& adapter);
  void store_block(std::uint64_t engine_hash, const Block& fresh, Tier tier, ChangeSink& sink);
  void remove_block(std::uint64_t engine_hash, Tier tier, ChangeSink& sink);
  static Tier tier_of(const Block& b);

  const StateOptions& options_;
  Counters& counters_;
  std::unordered_map<std::uint64_t, Block> blocks_;
  std::vector<std::string> adapters_;
  std::unordered_map<std::string, std::uint32_t> adapter_ids_;
  bool block_size_logged_ = false;
};

}  // namespace ic::tools::kvevents
