#pragma once
// The floors perf/index_bench.cc reports the index against (issue #13
// acceptance 3), as plain loops with no index code:
//
// - the probe and write floors: the same number of independent random reads
//   (read-modify-writes for ingest) into a table of the index's size and
//   record width, no hashing, no comparing;
// - the work floors: what the contract requires per block whatever the
//   layout, in the most favourable one (a key's entries next to it, a table
//   sized beforehand): a chain lookup hashes each block's bytes with the
//   table's seed, reads the home slot and its tag, compares the key record it
//   names, and passes once over the key's entries (replica against the
//   running candidate, last_seen against the TTL); ingest of a new key hashes
//   it, probes to an empty slot, writes the slot and tag and appends the key
//   record. If a work floor alone misses a target against its probe or write
//   floor, no layout meets that target.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "index/detail/records.hh"

namespace ic::perf::floors {

// The index's own mix (an 8-byte block hash is hashed as fmix64(bytes ^
// fmix64(seed + (tenant, model) id)), src/index/detail/records.hh group_hash).
using index::detail::fmix64;

// xorshift64: the next probe position without a load (probes independent).
inline std::uint64_t next_random(std::uint64_t& x) {
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return x;
}

// The index's record width: detail::SpillRec, 32 bytes (a key record, which
// holds the key's first entry, is 40).
struct FloorRec {
  std::uint64_t word[4];
};
static_assert(sizeof(FloorRec) == 32);
// The 1,000,000-entry index's record count.
inline constexpr std::size_t kFloorRecords = 1'000'000;
// A chain lookup of 64 blocks held by 8 replicas reads at least one key record
// (with its inline entry) and 7 spill records per block; an exact lookup of a
// key held by 8, one block's (docs/index.md "Layout and memory").
inline constexpr int kChainProbes = 64 * (1 + 7);
inline constexpr int kExactProbes = 1 + 7;

inline std::vector<FloorRec>& floor_table() {
  static std::vector<FloorRec> t = [] {
    std::vector<FloorRec> v(kFloorRecords);
    for (std::size_t i = 0; i < v.size(); ++i) v[i].word[0] = i;
    return v;
  }();
  return t;
}

// ---- the chain lookup's required work ----------------------------------

// One key of the work floor's table with its entries next to it.
struct WorkEntry {
  std::int64_t last_seen;
  std::uint32_t replica;
  std::int32_t token_count;
};
struct WorkKey {
  std::uint64_t bytes;   // the 8-byte block hash
  std::uint32_t domain;  // (tenant, model, scheme, adapter) id
  std::uint32_t entries;
  WorkEntry entry[8];
};

// 125,000 keys of 8 entries (1,000,000 entries) in a table of 4-byte slots and
// 1-byte tags, 2/3 full. The probe chain is keys [0, 64): block j held by the
// replicas k < 8 with j < 64 − 4k, as perf/index_world.hh's probe chain (400
// entries); the other keys hold 8 replicas.
class ChainWork {
 public:
  static constexpr std::size_t kKeys = 125'000, kBlocks = 64;
  static constexpr std::uint64_t kSeed = 0x5EED1DC0FFEEull;
  static constexpr std::int64_t kNow = 1'700'000'000'000'000, kTtl = 1'800'000'000;

  ChainWork() : slots_(kKeys * 3 / 2), tags_(slots_.size()), keys_(kKeys) {
    std::uint64_t x = 0x9E3779B97F4A7C15ull;
    for (std::uint32_t k = 0; k < kKeys; ++k) {
      WorkKey& w = keys_[k];
      w.bytes = next_random(x);
      w.domain = 1;
      w.entries = k < kBlocks
                      ? static_cast<std::uint32_t>(std::min<std::size_t>(8, (kBlocks - k + 3) / 4))
                      : 8;
      for (std::uint32_t e = 0; e < 8; ++e) w.entry[e] = WorkEntry{kNow - 1000, e, 16};
      std::size_t i = home(hash(w.bytes));
      while (slots_[i] != 0) i = i + 1 == slots_.size() ? 0 : i + 1;
      slots_[i] = k + 1;
      tags_[i] = static_cast<std::uint8_t>(hash(w.bytes) >> 56);
    }
    for (std::size_t j = 0; j < kBlocks; ++j) chain_.push_back(keys_[j].bytes);
  }

  // One lookup of the probe chain: the blocks each of the 8 replicas holds
  // from block 0 on, summed over the replicas (Σ of their run lengths; a
  // run's length is set when it ends, as the index does).
  std::uint64_t lookup() const {
    std::uint32_t alive = 0xFF;
    std::uint32_t run[8] = {};
    std::size_t j = 0;
    for (; j < chain_.size() && alive != 0; ++j) {
      const WorkKey* w = find(hash(chain_[j]), chain_[j]);
      if (w == nullptr) break;
      std::uint32_t held = 0;
      for (std::uint32_t e = 0; e < 8; ++e) {
        const WorkEntry& we = w->entry[e];
        const bool fresh = e < w->entries && kNow - we.last_seen < kTtl;
        held |= static_cast<std::uint32_t>(fresh) << (we.replica & 7);
      }
      if ((alive & ~held) != 0) {
        for (int r = 0; r < 8; ++r) {
          if ((alive & ~held) >> r & 1) run[r] = static_cast<std::uint32_t>(j);
        }
        alive &= held;
      }
    }
    std::uint64_t runs = 0;
    for (int r = 0; r < 8; ++r) runs += (alive >> r & 1) != 0 ? j : run[r];
    return runs;
  }

 private:
  static std::uint64_t hash(std::uint64_t bytes) { return fmix64(bytes ^ fmix64(kSeed + 1)); }
  std::size_t home(std::uint64_t h) const {
    return static_cast<std::size_t>(
        (std::uint64_t{static_cast<std::uint32_t>(h)} * slots_.size()) >> 32);
  }
  const WorkKey* find(std::uint64_t h, std::uint64_t bytes) const {
    const auto tag = static_cast<std::uint8_t>(h >> 56);
    for (std::size_t i = home(h); slots_[i] != 0; i = i + 1 == slots_.size() ? 0 : i + 1) {
      if (tags_[i] != tag) continue;
      const WorkKey& w = keys_[slots_[i] - 1];
      if (w.bytes == bytes && w.domain == 1) return &w;
    }
    return nullptr;
  }

  std::vector<std::uint32_t> slots_;
  std::vector<std::uint8_t> tags_;
  std::vector<WorkKey> keys_;
  std::vector<std::uint64_t> chain_;
};

// ---- ingest's required work --------------------------------------------

// A new key's record: the bytes, the domain and its one entry.
struct WorkKeyRec {
  std::uint64_t bytes;
  std::uint32_t domain, replica;
  std::int64_t last_seen;
  std::int32_t token_count;
  std::uint32_t tier;
};

// Inserts new keys of 8-byte hashes: hash, probe to an empty slot (comparing
// the key records whose tag matches), write the slot and tag, append the
// record. `presized`: the table and the records sized and touched for
// `keys` beforehand; else both grow from empty as the index's do (the table
// by 1.5×, rehashing every key from its record; fresh memory faulted in).
class IngestWork {
 public:
  IngestWork(std::size_t keys, bool presized) {
    if (!presized) {
      slots_.assign(16, 0);
      tags_.assign(16, 0);
      return;
    }
    slots_.assign(keys * 3 / 2, 0);
    tags_.assign(slots_.size(), 0);
    recs_.resize(keys);  // touched (zeroed) now, so no page faults while timed
    recs_.clear();
  }
  // Inserts the 16 new keys bytes[0, 16) of one chain update: every block hashed and its
  // home slot prefetched first (the misses overlap), then each inserted.
  void insert_chain(const std::uint64_t* bytes, std::uint32_t replica, std::int64_t seen) {
    std::uint64_t h[16];
    for (int j = 0; j < 16; ++j) {
      h[j] = fmix64(bytes[j] ^ fmix64(ChainWork::kSeed + 1));
      __builtin_prefetch(&slots_[home(h[j])]);
      __builtin_prefetch(&tags_[home(h[j])]);
    }
    for (int j = 0; j < 16; ++j) insert(bytes[j], h[j], replica, seen, 16 * (j + 1));
  }
  std::size_t size() const { return recs_.size(); }

 private:
  void insert(std::uint64_t bytes, std::uint64_t h, std::uint32_t replica, std::int64_t seen,
              std::int32_t tokens) {
    if ((recs_.size() + 1) * 4 > slots_.size() * 3) grow();
    const auto tag = static_cast<std::uint8_t>(h >> 56);
    std::size_t i = home(h);
    for (; slots_[i] != 0; i = after(i)) {
      if (tags_[i] == tag && recs_[slots_[i] - 1].bytes == bytes) return;  // present
    }
    recs_.push_back(WorkKeyRec{bytes, 1, replica, seen, tokens, 1});
    slots_[i] = static_cast<std::uint32_t>(recs_.size());
    tags_[i] = tag;
  }
  std::size_t home(std::uint64_t h) const {
    return static_cast<std::size_t>(
        (std::uint64_t{static_cast<std::uint32_t>(h)} * slots_.size()) >> 32);
  }
  std::size_t after(std::size_t i) const { return i + 1 == slots_.size() ? 0 : i + 1; }
  void grow() {
    slots_.assign(slots_.size() + slots_.size() / 2, 0);
    tags_.assign(slots_.size(), 0);
    for (std::size_t k = 0; k < recs_.size(); ++k) {
      const std::uint64_t h = fmix64(recs_[k].bytes ^ fmix64(ChainWork::kSeed + 1));
      std::size_t i = home(h);
      while (slots_[i] != 0) i = after(i);
      slots_[i] = static_cast<std::uint32_t>(k + 1);
      tags_[i] = static_cast<std::uint8_t>(h >> 56);
    }
  }

  std::vector<std::uint32_t> slots_;
  std::vector<std::uint8_t> tags_;
  std::vector<WorkKeyRec> recs_;
};

}  // namespace ic::perf::floors
