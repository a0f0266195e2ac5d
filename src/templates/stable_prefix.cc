#include "templates/stable_prefix.hh"

#include <xxhash.h>

#include <array>
#include <vector>

#include "fingerprint/fingerprint.hh"
#include "templates/line_tokens.hh"

namespace ic::templates {
namespace {

constexpr std::size_t kCacheSlots = 1024;

struct CacheSlot {
  XXH128_hash_t key{0, 0};
  std::size_t text_bytes = 0;
  bool used = false;
  StablePrefix value;
};

// Per reactor thread: results of texts tokenized before.
std::vector<CacheSlot>& thread_cache() {
  thread_local std::vector<CacheSlot> cache(kCacheSlots);
  return cache;
}

bool printable_non_space(char c) { return c > ' ' && c < 0x7f; }

}  // namespace

std::size_t stable_cut(std::string_view prompt, std::size_t volatile_at) {
  if (volatile_at >= prompt.size()) return prompt.size();
  for (std::size_t c = volatile_at; c > 1; --c) {
    // c < volatile_at: the byte at c is stable too.
    const std::size_t at = c - 1;
    if (prompt[at - 1] == '\n' && printable_non_space(prompt[at])) return at;
  }
  return 0;
}

StablePrefixJob::StablePrefixJob(const tokenizer::Tokenizer& tokenizer, std::string_view revision,
                                 std::string_view text, std::int32_t block_size)
    : tokenizer_(tokenizer), text_(text), block_size_(block_size) {
  const XXH64_hash_t seed = XXH3_64bits(revision.data(), revision.size());
  const XXH128_hash_t key = XXH3_128bits_withSeed(text.data(), text.size(), seed);
  key_low_ = key.low64;
  key_high_ = key.high64;
}

std::optional<PrefixStatus> StablePrefixJob::step(const std::function<bool()>& stop,
                                                  StablePrefix& out) {
  const XXH128_hash_t key{key_low_, key_high_};
  if (!encoding_) {
    const CacheSlot& slot = thread_cache()[key_low_ % kCacheSlots];
    if (slot.used && XXH128_isEqual(slot.key, key) && slot.text_bytes == text_.size()) {
      out = slot.value;
      return PrefixStatus::kOk;
    }
    encoding_.emplace(LineTokens::local(), tokenizer_, text_, tokens_);
  }
  switch (encoding_->step(stop)) {
    case tokenizer::EncodeStatus::kOk:
      break;
    case tokenizer::EncodeStatus::kDeadline:
    case tokenizer::EncodeStatus::kPaused:
      return std::nullopt;
    default:
      return PrefixStatus::kTokenize;
  }
  StablePrefix got;
  got.tokens = static_cast<std::int32_t>(tokens_.size());
  const std::size_t blocks =
      block_size_ > 0 ? tokens_.size() / static_cast<std::size_t>(block_size_) : 0;
  got.block_tokens = static_cast<std::int32_t>(blocks * static_cast<std::size_t>(block_size_));
  if (blocks > 0) {
    const std::vector<std::uint64_t> chain = fingerprint::prefix_hashes(tokens_, block_size_);
    const auto wire = fingerprint::to_wire(chain.back());
    got.hash.assign(reinterpret_cast<const char*>(wire.data()), wire.size());
  }
  // Looked up again: other jobs may have used the slot between two steps.
  CacheSlot& slot = thread_cache()[key_low_ % kCacheSlots];
  slot.key = key;
  slot.text_bytes = text_.size();
  slot.used = true;
  slot.value = got;
  out = std::move(got);
  return PrefixStatus::kOk;
}

PrefixStatus stable_prefix(const tokenizer::Tokenizer& tokenizer, std::string_view revision,
                           std::string_view text, std::int32_t block_size,
                           const std::function<bool()>& expired, StablePrefix& out) {
  StablePrefixJob job(tokenizer, revision, text, block_size);
  return job.step(expired, out).value_or(PrefixStatus::kTimeout);
}

}  // namespace ic::templates
