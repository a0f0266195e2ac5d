#pragma once
// The stable prefix of a rendered prompt (docs/templates.md "The stable
// prefix"): where to cut the text so that its tokens are the leading tokens
// of every prompt that shares the text before the volatile part, and the
// fingerprint of those tokens in whole KV blocks.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "templates/line_tokens.hh"
#include "tokenizer/tokenizer.hh"

namespace ic::templates {

// The stable cut of `prompt` whose volatile part may begin at byte
// `volatile_at` (≤ prompt.size(); prompt.size() when nothing volatile was
// read: the whole prompt is stable, cut at its end). Otherwise the last
// position c < volatile_at right after a '\n' and at a printable ASCII
// character other than space; 0 when there is none.
//
// Why there: a byte-level BPE tokenizer of the supported kind (GPT-2, Qwen2+
// and Llama 3 split regexes, added tokens without newlines) never lets a
// pre-token run from a newline into a following non-space character, and
// every pre-token before c is decided by the bytes up to c, so the tokens of
// prompt[0, c) are the leading tokens of the whole prompt whatever follows c.
// A cut right at volatile_at would not be: the volatile text may join the
// word or the whitespace run before it.
std::size_t stable_cut(std::string_view prompt, std::size_t volatile_at);

// The tokens of one stable text and their fingerprint.
struct StablePrefix {
  std::int32_t tokens = 0;        // tokens of the text
  std::int32_t block_tokens = 0;  // tokens in its whole KV blocks (≤ tokens)
  // The `vllm` scheme prefix hash (docs/fingerprint.md) of the last whole
  // block, wire form (8 bytes big-endian); empty with no whole block.
  std::string hash;
};

enum class PrefixStatus : std::uint8_t {
  kOk,
  kTokenize,  // invalid UTF-8, the split regex gave up, a pre-token over its bound
  kTimeout,   // `expired` turned true (the render's tokenizing budget)
};

// Tokenizes `text` with `tokenizer` (this thread's workspace) and hashes its
// whole blocks of `block_size` tokens. A per-thread cache of 1,024 results,
// keyed by (`revision`, XXH3-128 of `text`), answers a text seen before
// without tokenizing: the calls of one template family share their stable
// text. A new text reuses the ids of the lines this thread tokenized before
// (line_tokens.hh): only its changed lines are tokenized. `expired` (may be
// empty) is polled while tokenizing.
PrefixStatus stable_prefix(const tokenizer::Tokenizer& tokenizer, std::string_view revision,
                           std::string_view text, std::int32_t block_size,
                           const std::function<bool()>& expired, StablePrefix& out);

// stable_prefix() as a job run in steps (the server's slices,
// prompt_text/scheduler.hh): the first step answers from the cache when it
// can, whatever `stop` says; otherwise the text's pieces are encoded
// (LineEncoding: a cached piece at once, a new one in the tokenizer's units)
// until `stop()`, polled between them, returns true.
// The answer is the one stable_prefix() gives, however the steps fall.
class StablePrefixJob {
 public:
  // `tokenizer`, `revision` and `text` outlive the job.
  StablePrefixJob(const tokenizer::Tokenizer& tokenizer, std::string_view revision,
                  std::string_view text, std::int32_t block_size);
  StablePrefixJob(const StablePrefixJob&) = delete;
  StablePrefixJob& operator=(const StablePrefixJob&) = delete;

  // Done: the status (kOk: `out` set, and the result cached); nullopt when
  // `stop()` paused it (step again to go on).
  std::optional<PrefixStatus> step(const std::function<bool()>& stop, StablePrefix& out);

 private:
  const tokenizer::Tokenizer& tokenizer_;
  std::string_view text_;
  std::int32_t block_size_;
  std::uint64_t key_low_ = 0, key_high_ = 0;  // XXH3-128 of the text, seeded by the revision
  std::vector<tokenizer::TokenId> tokens_;
  std::optional<LineEncoding> encoding_;  // the stable text's pieces (line_tokens.hh)
};

}  // namespace ic::templates
