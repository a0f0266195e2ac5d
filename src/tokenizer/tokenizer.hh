#pragma once
// A byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json, the
// kind Qwen2/2.5/3 and Llama 3 ship (docs/prompt-text.md "Tokenizer"):
//
//   text → added/special tokens cut out (leftmost-longest)
//        → per ordinary segment: normalizer (none or NFC)
//        → Split regex pre-tokenizer (PCRE2) → ByteLevel bytes
//        → BPE merges per word (cached per thread) → token ids
//
// Encoding never adds special tokens (no BOS/EOS post-processing): the chat
// template already writes them, as transformers' apply_chat_template does.
// A Tokenizer is immutable after load and shared by every core; each thread
// encodes with its own Workspace.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/added_tokens.hh"
#include "tokenizer/bpe.hh"
#include "tokenizer/split_regex.hh"

namespace ic::tokenizer {

// Why an encode stopped without a result (the lookup then fails open).
enum class EncodeStatus {
  kOk,
  kInvalidUtf8,  // the text is not well-formed UTF-8
  kDeadline,     // `expired` turned true before the end
  kRegexError,   // PCRE2 gave up (match limit or JIT stack)
  kTooLong,      // a pre-token or an NFC stretch over its bound (tokenizer/encoding.hh)
  kPaused,       // Encoding::step() stopped between units; step() again to go on
};

class Workspace;

class Tokenizer {
 public:
  // Parses tokenizer.json text. nullptr + `error` (one line naming the field)
  // for malformed JSON or anything outside the supported subset: model type
  // BPE without byte_fallback/dropout/subword affixes; normalizer null, NFC or
  // a Sequence of NFC; pre_tokenizer ByteLevel (use_regex, no prefix space)
  // or Sequence[Split(Regex, Isolated), ByteLevel(use_regex false)]; added
  // tokens without lstrip/rstrip/single_word.
  static std::unique_ptr<Tokenizer> load(std::string_view tokenizer_json, std::string& error);
  ~Tokenizer();

  // Replaces `out` with the tokens of `text`, in one go (the same units as
  // an Encoding, tokenizer/encoding.hh). `expired` (may be empty) is polled
  // before the first unit and then every few KiB of work: kDeadline once it
  // returns true. On anything but kOk `out` is partial.
  EncodeStatus encode(std::string_view text, Workspace& workspace, std::vector<TokenId>& out,
                      const std::function<bool()>& expired = {}) const;

  // The first stage of encode(): f(run, nullptr) for each run of ordinary
  // text and f(content, &id) for each added token, in order. Each run
  // encodes on its own (encode(run) gives exactly the ids encode(text) gives
  // for it), which lets a caller reuse the ids of runs it has seen before
  // (src/gateway/segment_tokens.hh).
  template <typename F>
  void split_added(std::string_view text, F&& f) const {
    added_.split(text, std::forward<F>(f));
  }

  // The id of an added token with exactly this content, or -1.
  std::int64_t added_token_id(std::string_view content) const;

  // Entries of the BPE vocabulary (added tokens not counted).
  std::size_t vocab_size() const { return bpe_->vocab_size(); }

 private:
  friend class Encoding;
  Tokenizer() = default;
  void encode_word(std::string_view word, Workspace& ws, std::vector<TokenId>& out) const;

  std::uint64_t serial_ = 0;  // unique per loaded tokenizer (word cache owner)
  std::unique_ptr<BpeModel> bpe_;
  std::unique_ptr<SplitRegex> split_;
  AddedTokens added_;
  std::vector<std::pair<std::string, TokenId>> added_list_;
  bool nfc_ = false;
};

// Per-thread encoding state: regex match data, merge buffers and a word
// cache (direct-mapped, kWordCacheSlots slots of words up to
// kMaxCachedWordBytes, so memory stays bounded whatever the input).
class Workspace {
 public:
  static constexpr std::size_t kWordCacheSlots = 8192;
  static constexpr std::size_t kMaxCachedWordBytes = 32;
  // Allocates the cache slots (about 0.5 MiB once filled); buffers grow to
  // the longest word seen and are reused.
  Workspace();

 private:
  friend class Tokenizer;
  friend class Encoding;
  struct CachedWord {
    // Tokenizer::serial_ of the tokenizer that cached it (0 = none): not
    // its address, which a tokenizer loaded after another was freed may
    // reuse (tests load and free models on one thread).
    std::uint64_t owner = 0;
    std::string word;
    std::vector<TokenId> ids;
  };
  RegexScratch regex_;
  BpeScratch bpe_;
  std::string normalized_;
  std::vector<CachedWord> cache_;
};

}  // namespace ic::tokenizer
