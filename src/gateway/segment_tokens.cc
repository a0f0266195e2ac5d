#include "gateway/segment_tokens.hh"

#include "base/long_hash.hh"

#include <utility>

namespace ic::gateway {

SegmentTokens& SegmentTokens::local() {
  thread_local SegmentTokens cache;
  return cache;
}

tokenizer::EncodeStatus SegmentTokens::encode(const tokenizer::Tokenizer& tokenizer,
                                              std::string_view text,
                                              std::vector<std::uint32_t>& out,
                                              const std::function<bool()>& expired) {
  tokenizer::EncodeStatus status = tokenizer::EncodeStatus::kOk;
  tokenizer.split_added(text, [&](std::string_view run, const tokenizer::TokenId* id) {
    if (status != tokenizer::EncodeStatus::kOk) return;
    if (id != nullptr) {
      out.push_back(*id);
      return;
    }
    if (expired && expired()) {
      status = tokenizer::EncodeStatus::kDeadline;
      return;
    }
    status = encode_run(tokenizer, run, out, expired);
  });
  return status;
}

tokenizer::EncodeStatus SegmentTokens::encode_run(const tokenizer::Tokenizer& tokenizer,
                                                  std::string_view run,
                                                  std::vector<std::uint32_t>& out,
                                                  const std::function<bool()>& expired) {
  if (run.size() < kMinCachedBytes) {
    const auto status = tokenizer.encode(run, workspace_, scratch_, expired);
    if (status == tokenizer::EncodeStatus::kOk)
      out.insert(out.end(), scratch_.begin(), scratch_.end());
    return status;
  }
  const XXH128_hash_t h = XXH3_128bits(run.data(), run.size());
  const Key key{h.low64, h.high64, &tokenizer};
  if (auto it = entries_.find(key); it != entries_.end()) {
    ++hits_;
    it->second.used = true;
    out.insert(out.end(), it->second.ids.begin(), it->second.ids.end());
    return tokenizer::EncodeStatus::kOk;
  }
  ++misses_;
  const auto status = tokenizer.encode(run, workspace_, scratch_, expired);
  if (status != tokenizer::EncodeStatus::kOk) return status;
  out.insert(out.end(), scratch_.begin(), scratch_.end());
  if (scratch_.size() <= kMaxCachedIds / 4) insert(key, scratch_);
  return status;
}

bool SegmentTokens::lookup(const tokenizer::Tokenizer& tokenizer, std::string_view run,
                           std::vector<std::uint32_t>& out) {
  if (run.size() < kMinCachedBytes) return false;
  const XXH128_hash_t h = XXH3_128bits(run.data(), run.size());
  auto it = entries_.find(Key{h.low64, h.high64, &tokenizer});
  if (it == entries_.end()) {
    ++misses_;
    return false;
  }
  ++hits_;
  lru_.splice(lru_.begin(), lru_, it->second.age);
  out.insert(out.end(), it->second.ids.begin(), it->second.ids.end());
  return true;
}

void SegmentTokens::remember(const tokenizer::Tokenizer& tokenizer, std::string_view run,
                             const std::vector<std::uint32_t>& ids) {
  if (run.size() < kMinCachedBytes || ids.size() > kMaxCachedIds / 4) return;
  const XXH128_hash_t h = XXH3_128bits(run.data(), run.size());
  const Key key{h.low64, h.high64, &tokenizer};
  if (entries_.count(key) != 0) return;  // another job made them meanwhile
  insert(key, ids);
}

void SegmentTokens::insert(const Key& key, std::vector<std::uint32_t> ids) {
  std::size_t chances = 0;
  while (!lru_.empty() &&
         (cached_ids_ + ids.size() > kMaxCachedIds || entries_.size() >= kMaxEntries)) {
    auto victim = entries_.find(lru_.back());
    if (victim->second.used && chances++ < kMaxSecondChances) {
      victim->second.used = false;
      lru_.splice(lru_.begin(), lru_, victim->second.age);
      continue;
    }
    cached_ids_ -= victim->second.ids.size();
    entries_.erase(victim);
    lru_.pop_back();
  }
  lru_.push_front(key);
  cached_ids_ += ids.size();
  entries_.emplace(key, Entry{std::move(ids), lru_.begin()});
}

}  // namespace ic::gateway
