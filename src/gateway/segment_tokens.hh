#pragma once
// Token ids of a rendered prompt, reusing the ids of the text runs this core
// has tokenized before (docs/gateway.md "Next turn"). The tokenizer cuts its
// added tokens (<|im_start|>, <|eot_id|>, ...) out first and encodes every
// run between them on its own (tokenizer::Tokenizer::split_added), and chat
// templates put such tokens between messages: a conversation's next turn
// re-renders every earlier message into the same runs, whose ids come from
// here, and only the new turn's runs are tokenized. Exact by construction:
// the ids equal Tokenizer::encode of the whole text.
//
// One cache per core (reactor thread), keyed by XXH3-128 of the run's bytes
// and the tokenizer's identity, bounded by the ids it holds (kMaxCachedIds,
// about 16 MiB) and its entries; evicted second chance as
// gateway/message_cache.hh is (a hit only sets a flag).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.hh"

namespace ic::gateway {

class SegmentTokens {
 public:
  // Runs shorter than this are encoded every time (the tokenizer's word cache
  // makes them cheap; caching them would cost more than it saves), bytes.
  static constexpr std::size_t kMinCachedBytes = 128;
  // Token ids held at most (4 bytes each) and entries at most.
  static constexpr std::size_t kMaxCachedIds = 4u << 20;
  static constexpr std::size_t kMaxEntries = 64u << 10;
  // Entries one insert moves to the front at most before it evicts the oldest.
  static constexpr std::size_t kMaxSecondChances = 16;

  // Appends the ids of `text` to `out` (not cleared). `expired` (may be
  // empty) is polled between runs and inside long ones; on anything but kOk
  // `out` is partial.
  tokenizer::EncodeStatus encode(const tokenizer::Tokenizer& tokenizer, std::string_view text,
                                 std::vector<std::uint32_t>& out,
                                 const std::function<bool()>& expired);

  // For a caller that tokenizes a run itself in steps (PromptTokensJob,
  // gateway/prompt_tokens.hh): appends the cached ids of `run` to `out` and
  // returns true (a hit), or false (a miss when `run` is long enough to be
  // cached). remember() then keeps the ids it made, as encode() would have.
  bool lookup(const tokenizer::Tokenizer& tokenizer, std::string_view run,
              std::vector<std::uint32_t>& out);
  void remember(const tokenizer::Tokenizer& tokenizer, std::string_view run,
                const std::vector<std::uint32_t>& ids);

  // Runs whose ids came from the cache / were tokenized, since construction.
  std::uint64_t hits() const { return hits_; }
  std::uint64_t misses() const { return misses_; }
  std::size_t cached_ids() const { return cached_ids_; }

  // This thread's cache.
  static SegmentTokens& local();

 private:
  struct Key {
    std::uint64_t low = 0, high = 0;
    const void* tokenizer = nullptr;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const { return static_cast<std::size_t>(k.low); }
  };
  struct Entry {
    std::vector<std::uint32_t> ids;
    std::list<Key>::iterator age;  // position in lru_ (front = newest)
    bool used = false;             // hit since it last came to the front
  };

  tokenizer::EncodeStatus encode_run(const tokenizer::Tokenizer& tokenizer, std::string_view run,
                                     std::vector<std::uint32_t>& out,
                                     const std::function<bool()>& expired);
  void insert(const Key& key, std::vector<std::uint32_t> ids);

  std::unordered_map<Key, Entry, KeyHash> entries_;
  std::list<Key> lru_;  // front = inserted or given a second chance last
  std::size_t cached_ids_ = 0;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
  std::vector<std::uint32_t> scratch_;
  tokenizer::Workspace workspace_;
};

}  // namespace ic::gateway
