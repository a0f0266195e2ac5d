#include "gateway/message_cache.hh"

#include "base/long_hash.hh"

#include <utility>

namespace ic::gateway {

MessageCache& MessageCache::local() {
  thread_local MessageCache cache;
  return cache;
}

MessageCache::Key MessageCache::key_of(std::string_view bytes) {
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return {h.low64, h.high64};
}

std::optional<chat_template::Value> MessageCache::find(std::string_view bytes) {
  auto it = entries_.find(key_of(bytes));
  if (it == entries_.end()) {
    ++misses_;
    return std::nullopt;
  }
  ++hits_;
  it->second.used = true;
  return it->second.value;
}

void MessageCache::insert(std::string_view bytes, chat_template::Value value) {
  if (bytes.size() > kMaxPieceBytes) return;
  const Key key = key_of(bytes);
  if (entries_.contains(key)) return;
  std::size_t chances = 0;
  while (!lru_.empty() &&
         (cached_bytes_ + bytes.size() > kMaxCachedBytes || entries_.size() >= kMaxEntries)) {
    auto victim = entries_.find(lru_.back());
    if (victim->second.used && chances++ < kMaxSecondChances) {
      victim->second.used = false;
      lru_.splice(lru_.begin(), lru_, victim->second.age);
      continue;
    }
    cached_bytes_ -= victim->second.bytes;
    entries_.erase(victim);
    lru_.pop_back();
  }
  lru_.push_front(key);
  cached_bytes_ += bytes.size();
  entries_.emplace(key, Entry{std::move(value), bytes.size(), lru_.begin()});
}

}  // namespace ic::gateway
