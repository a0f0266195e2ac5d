#pragma once
// One text's encoding as a resumable job (docs/prompt-text.md "Where it runs
// and its bounds"): the work of Tokenizer::encode cut into units that each
// cost a bounded amount, so a caller can stop between any two of them and
// resume later (the server runs one slice per reactor turn) with exactly the
// tokens an uninterrupted encode gives.
//
// Units: 64 KiB of UTF-8 validation; 64 KiB of the added-token scan; up to
// 4 KiB of one segment's NFC (cut where NFC cannot join the two sides, see
// below); one pre-token found by the split regex and, for words up to
// kLongWordBytes, its BPE merge; 1,024 merge steps of a longer word.
//
// Bounds (EncodeStatus::kTooLong when crossed, the caller fails open):
// - a pre-token longer than kMaxPretokenBytes: the regex runs on a window of
//   the text that grows from 4 KiB and stops there (PCRE2 partial matching
//   tells when a match might reach past the window, so every match found is
//   the one the whole text gives);
// - NFC is cut before a code point that neither decomposes, combines
//   (canonical class 0) nor composes with what precedes it; a stretch of
//   kMaxNfcStretchBytes without one fails (utf8proc sorts combining marks
//   with a quadratic pass, so this also bounds the cost of one cut).

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.hh"

namespace ic::tokenizer {

class Encoding {
 public:
  static constexpr std::size_t kMaxPretokenBytes = 64 * 1024;
  static constexpr std::size_t kMaxNfcStretchBytes = 2 * 1024;
  // Words up to this size are merged in one unit; longer ones in steps.
  static constexpr std::size_t kLongWordBytes = 4 * 1024;

  // Encodes `text` with `tokenizer` into `out` (cleared now); the caller
  // keeps all three alive until the job is done.
  Encoding(const Tokenizer& tokenizer, std::string_view text, std::vector<TokenId>& out);

  // Runs units until the text is encoded, an error, or `stop()` (polled
  // before the first unit and then every few KiB of work or 1,024 merge
  // steps) returns true: then kPaused, and the next step() resumes there.
  // `workspace` is this thread's; nothing of it is needed between steps.
  EncodeStatus step(Workspace& workspace, const std::function<bool()>& stop);

  // Units of work run so far (for tests: a job cut into many slices).
  std::uint64_t units() const { return units_; }

 private:
  enum class Stage { kValidate, kScanAdded, kPiece, kNormalize, kSplit, kLongWord, kDone };
  struct Piece {
    std::size_t begin, end;
    std::int64_t id;  // an added token's id, or -1 for ordinary text
  };

  EncodeStatus run_unit(Workspace& ws);
  EncodeStatus validate_unit();
  EncodeStatus scan_added_unit();
  EncodeStatus piece_unit();
  EncodeStatus normalize_unit(Workspace& ws);
  EncodeStatus split_unit(Workspace& ws);
  EncodeStatus long_word_unit();
  // Encodes one pre-token of the current segment: at once, or by starting
  // the long-word stage.
  void word(std::string_view w, Workspace& ws);
  void start_split(std::string_view segment);

  const Tokenizer& tok_;
  std::string_view text_;
  Stage stage_ = Stage::kValidate;
  std::size_t pos_ = 0;  // validate / scan position in text_
  std::size_t run_ = 0;  // scan: start of the ordinary run before pos_
  std::vector<Piece> pieces_;
  std::size_t piece_ = 0;
  std::string_view segment_;        // the current ordinary piece (normalized)
  std::string normalized_;          // its NFC form, built unit by unit
  std::size_t seg_pos_ = 0;         // NFC: next byte of the raw piece
  std::size_t gap_ = 0, from_ = 0;  // split: unmatched run start, next search
  std::size_t window_ = 0;          // split: bytes past from_ the regex sees
  BpeScratch long_;                 // the long word being merged
  std::vector<TokenId>& out_;       // the tokens so far (all of them after kOk)
  std::size_t work_ = 0;            // bytes (or merge steps) since the last poll
  std::uint64_t units_ = 0;
};

}  // namespace ic::tokenizer
