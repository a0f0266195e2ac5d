#pragma once
// Token ids of a stable text, reusing the ids of the lines this thread has
// tokenized before (docs/templates.md "The stable prefix"). The first call
// with new stable values (a new session id, today's date, one tool schema
// more) usually changes a line or two of a long stable text: the ids of its
// other lines come from here, and only the changed ones are tokenized.
//
// Exact by construction: the text is cut only where stable_cut may cut
// (right after a '\n', at a printable character other than space:
// stable_prefix.hh says why no pre-token of a supported tokenizer runs
// across such a position; the pre-tokens after it do not depend on the bytes
// before it, as the split regexes look ahead, never behind, and added tokens
// hold no newline), so the ids of the text are the ids of its pieces, one
// after the other.
//
// Pieces: a line cut there, joined with the lines after it until the piece
// holds at least kMinPieceBytes, so a piece boundary depends only on the
// nearby text and the pieces of two texts line up again after a changed
// line. One cache per thread (reactor), two-way set-associative slots keyed
// by XXH3-128 of the piece and the tokenizer's identity, bounded by the ids
// it holds.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "tokenizer/encoding.hh"
#include "tokenizer/tokenizer.hh"

namespace ic::templates {

class LineTokens {
 public:
  // A piece holds at least this many bytes (the text's last one excepted):
  // a shorter piece would cost more in lookups and encode calls than it saves.
  static constexpr std::size_t kMinPieceBytes = 128;
  // Slots, and token ids held at most (4 bytes each: 4 MiB per thread).
  static constexpr std::size_t kSlots = 4096;
  static constexpr std::size_t kMaxCachedIds = std::size_t{1} << 20;

  // Replaces `out` with the ids of `text` (what tokenizer.encode gives).
  // `expired` (may be empty) is polled between pieces and inside the ones
  // tokenized; on anything but kOk `out` is partial.
  tokenizer::EncodeStatus encode(const tokenizer::Tokenizer& tokenizer, std::string_view text,
                                 std::vector<tokenizer::TokenId>& out,
                                 const std::function<bool()>& expired);

  // Pieces whose ids came from the cache / were tokenized, since construction.
  std::uint64_t hits() const { return hits_; }
  std::uint64_t misses() const { return misses_; }
  // Token ids held now (≤ kMaxCachedIds).
  std::size_t cached_ids() const { return cached_ids_; }

  // This thread's cache.
  static LineTokens& local();

 private:
  friend class LineEncoding;
  struct Slot {
    std::uint64_t low = 0, high = 0;
    const void* tokenizer = nullptr;  // nullptr: empty slot
    std::vector<tokenizer::TokenId> ids;
  };

  // Appends the cached ids of the piece hashed `low`/`high` to `out`; false on a miss.
  bool lookup(const tokenizer::Tokenizer& tokenizer, std::uint64_t low, std::uint64_t high,
              std::vector<tokenizer::TokenId>& out);
  // Keeps `ids` as the piece's (when the bound allows; else the older piece stays).
  void remember(const tokenizer::Tokenizer& tokenizer, std::uint64_t low, std::uint64_t high,
                const std::vector<tokenizer::TokenId>& ids);

  std::vector<Slot> slots_ = std::vector<Slot>(kSlots);
  std::size_t cached_ids_ = 0;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
};

// LineTokens::encode as a job run in steps (a tokenizing job of the core's
// scheduler, prompt_text/scheduler.hh): the pieces one after the other, a
// cached one appended at once, a missed one tokenized in the tokenizer's
// units (tokenizer/encoding.hh). The cache is looked up and filled at piece
// boundaries only, so other jobs may use it between two steps.
class LineEncoding {
 public:
  // `cache` (the thread's), `tokenizer`, `text` and `out` (cleared now)
  // outlive the job.
  LineEncoding(LineTokens& cache, const tokenizer::Tokenizer& tokenizer, std::string_view text,
               std::vector<tokenizer::TokenId>& out);
  LineEncoding(const LineEncoding&) = delete;
  LineEncoding& operator=(const LineEncoding&) = delete;

  // Runs until the text is encoded (kOk), an error, or `stop()` (polled
  // between pieces and inside a missed one) returns true: then kPaused, and
  // the next step() resumes there. On anything but kOk `out` is partial.
  tokenizer::EncodeStatus step(const std::function<bool()>& stop);

 private:
  LineTokens& cache_;
  const tokenizer::Tokenizer& tokenizer_;
  std::string_view text_;
  std::vector<tokenizer::TokenId>& out_;
  std::size_t from_ = 0, to_ = 0;        // the piece being tokenized: [from_, to_)
  std::uint64_t low_ = 0, high_ = 0;     // its XXH3-128
  std::vector<tokenizer::TokenId> ids_;  // its ids while it is tokenized
  std::optional<tokenizer::Encoding> piece_;
};

// The end of the piece of `text` that starts at `from` (< text.size()): the
// first position where stable_cut may cut at least kMinPieceBytes after
// `from`, else text.size().
std::size_t piece_end(std::string_view text, std::size_t from);

}  // namespace ic::templates
