#pragma once
// The template values of JSON pieces this core has parsed before, keyed by
// their bytes (docs/gateway.md "Next turn"): a chat's messages and tools come
// back byte for byte in its next turn, and a hit skips their JSON parse. One
// cache per core (reactor thread), keyed by XXH3-128 of the bytes, bounded by
// the bytes it stands for (kMaxCachedBytes: the values take about as much) and
// its entries. Eviction is second chance (CLOCK, an approximation of least
// recently used): the oldest entry goes out unless hit since it came to the
// front, then it goes to the front once more. A hit only sets a flag: a next
// turn hits every earlier message, and moving each in a list cost a cache miss
// apiece.

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "chat_template/value.hh"

namespace ic::gateway {

class MessageCache {
 public:
  static constexpr std::size_t kMaxCachedBytes = 32u << 20;
  static constexpr std::size_t kMaxEntries = 64u << 10;
  // Pieces longer than this are not kept (one would take a large share).
  static constexpr std::size_t kMaxPieceBytes = 4u << 20;
  // Entries one insert moves to the front at most before it evicts the
  // oldest whatever its flag (the insert's work stays bounded).
  static constexpr std::size_t kMaxSecondChances = 16;

  // The value parsed from exactly `bytes`, if kept (and marks it used).
  std::optional<chat_template::Value> find(std::string_view bytes);
  // Keeps `value` as the parse of `bytes`.
  void insert(std::string_view bytes, chat_template::Value value);

  std::uint64_t hits() const { return hits_; }
  std::uint64_t misses() const { return misses_; }

  // This thread's cache.
  static MessageCache& local();

 private:
  struct Key {
    std::uint64_t low = 0, high = 0;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const { return static_cast<std::size_t>(k.low); }
  };
  struct Entry {
    chat_template::Value value;
    std::size_t bytes = 0;
    std::list<Key>::iterator age;  // position in lru_ (front = newest)
    bool used = false;             // hit since it last came to the front
  };
  static Key key_of(std::string_view bytes);

  std::unordered_map<Key, Entry, KeyHash> entries_;
  std::list<Key> lru_;  // front = inserted or given a second chance last
  std::size_t cached_bytes_ = 0;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
};

}  // namespace ic::gateway
