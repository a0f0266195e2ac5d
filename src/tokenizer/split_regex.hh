#pragma once
// The `Split` pre-tokenizer of tokenizer.json (behavior "Isolated", not
// inverted): every regex match is one piece, and so is every gap between
// matches. Compiled once with PCRE2 (UTF + UCP, JIT when available).
//
// The patterns are written for Oniguruma (what Hugging Face tokenizers runs).
// PCRE2 agrees on \p{..} classes, (?i:..) and lookahead, but its \s (with UCP)
// differs from Oniguruma's Unicode White_Space (it adds U+180E); \s is
// therefore rewritten into the explicit White_Space set before compiling.

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>
#include <string>
#include <string_view>

namespace ic::tokenizer {

// Oniguruma's \s for Unicode strings (Unicode White_Space), as a class body.
inline constexpr std::string_view kWhiteSpaceClass =
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

// Rewrites \s and \S (outside classes) and \s (inside classes) into explicit
// White_Space classes; false + `error` for \S inside a class (unsupported).
bool rewrite_white_space(std::string_view pattern, std::string& out, std::string& error);

// Per-thread matching state (match data and a JIT stack); one per reactor
// core, reused for every call.
class RegexScratch {
 public:
  RegexScratch();
  ~RegexScratch();
  RegexScratch(const RegexScratch&) = delete;
  RegexScratch& operator=(const RegexScratch&) = delete;
  // PCRE2 match data (16 pairs) and the match context holding the JIT stack
  // and the interpreter's match and heap limits.
  pcre2_match_data* match_data() const { return match_data_; }
  pcre2_match_context* context() const { return context_; }

 private:
  pcre2_match_data* match_data_;
  pcre2_match_context* context_;
  pcre2_jit_stack* jit_stack_;
};

class SplitRegex {
 public:
  // nullptr + `error` (PCRE2's message with the offset) when the pattern
  // does not compile.
  static std::unique_ptr<SplitRegex> compile(std::string_view pattern, std::string& error);
  ~SplitRegex();
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;

  // Calls f(piece) for each match and each non-empty gap, in order. `text`
  // must be valid UTF-8 (not re-checked). False when PCRE2 fails (match or
  // JIT stack limit): the caller fails open.
  template <typename F>
  bool split(std::string_view text, RegexScratch& scratch, F&& f) const;
  // True when PCRE2 JIT-compiled the pattern (else the interpreter runs).
  bool jit() const { return jit_; }

  // The next match at or after `from`, the regex seeing only
  // text[0, window_end) (window_end on a code point boundary). When
  // window_end < text.size() the match is hard-partial (PCRE2_PARTIAL_HARD):
  // a match that more text could change is not reported, so every match
  // found is the one the whole text gives. 1 = found ([start, end)), 0 = no
  // match starts before window_end, 2 = one may reach past window_end (look
  // through a larger window), -1 = PCRE2 error.
  int next_in_window(std::string_view text, std::size_t from, std::size_t window_end,
                     RegexScratch& scratch, std::size_t& start, std::size_t& end) const;

 private:
  explicit SplitRegex(pcre2_code* code) : code_(code) {}
  // Next match at or after `offset`: 1 = found ([start, end)), 0 = none, -1 = error.
  int next(std::string_view text, std::size_t offset, RegexScratch& scratch, std::size_t& start,
           std::size_t& end) const;
  pcre2_code* code_;
  bool jit_ = false;
};

// ---- implementation ----

template <typename F>
bool SplitRegex::split(std::string_view text, RegexScratch& scratch, F&& f) const {
  std::size_t gap = 0, from = 0;  // start of the unmatched run; where to search next
  while (from < text.size()) {
    std::size_t start = 0, end = 0;
    const int found = next(text, from, scratch, start, end);
    if (found < 0) return false;
    if (found == 0) break;
    if (end == start) {  // an empty match makes no piece: search on after it
      from = start + 1;
      while (from < text.size() && (static_cast<unsigned char>(text[from]) & 0xC0) == 0x80) ++from;
      continue;
    }
    if (start > gap) f(text.substr(gap, start - gap));
    f(text.substr(start, end - start));
    gap = from = end;
  }
  if (gap < text.size()) f(text.substr(gap));
  return true;
}

}  // namespace ic::tokenizer
