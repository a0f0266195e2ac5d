#include "tokenizer/split_regex.hh"

namespace ic::tokenizer {
namespace {

// JIT stack bounds: deep alternations over long whitespace runs need more
// than PCRE2's 32 KiB default; the cap bounds memory per core.
constexpr std::size_t kJitStackStart = 32 * 1024;
constexpr std::size_t kJitStackMax = 1024 * 1024;
// Interpreter fallback bounds (no JIT on this CPU): backtracking steps and
// heap, so a hostile text cannot spin a reactor.
constexpr std::uint32_t kMatchLimit = 10'000'000;
constexpr std::uint32_t kHeapLimitKib = 8 * 1024;

}  // namespace

bool rewrite_white_space(std::string_view pattern, std::string& out, std::string& error) {
  out.clear();
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's') {
        if (in_class) {
          out += kWhiteSpaceClass;
        } else {
          out += '[';
          out += kWhiteSpaceClass;
          out += ']';
        }
      } else if (e == 'S') {
        if (in_class) {
          error = "\\S inside a character class is not supported";
          return false;
        }
        out += "[^";
        out += kWhiteSpaceClass;
        out += ']';
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == '[') {
      error = "nested character classes are not supported";
      return false;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return true;
}

RegexScratch::RegexScratch()
    : match_data_(pcre2_match_data_create(16, nullptr)),
      context_(pcre2_match_context_create(nullptr)),
      jit_stack_(pcre2_jit_stack_create(kJitStackStart, kJitStackMax, nullptr)) {
  pcre2_jit_stack_assign(context_, nullptr, jit_stack_);
  pcre2_set_match_limit(context_, kMatchLimit);
  pcre2_set_heap_limit(context_, kHeapLimitKib);
}

RegexScratch::~RegexScratch() {
  pcre2_jit_stack_free(jit_stack_);
  pcre2_match_context_free(context_);
  pcre2_match_data_free(match_data_);
}

std::unique_ptr<SplitRegex> SplitRegex::compile(std::string_view pattern, std::string& error) {
  std::string rewritten;
  if (!rewrite_white_space(pattern, rewritten, error)) return nullptr;
  int code = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(rewritten.data()), rewritten.size(),
                                 PCRE2_UTF | PCRE2_UCP, &code, &offset, nullptr);
  if (re == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(code, message, sizeof message);
    error = "regex does not compile at offset " + std::to_string(offset) + ": " +
            reinterpret_cast<const char*>(message);
    return nullptr;
  }
  auto regex = std::unique_ptr<SplitRegex>(new SplitRegex(re));
  regex->jit_ = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE | PCRE2_JIT_PARTIAL_HARD) == 0;
  return regex;
}

SplitRegex::~SplitRegex() { pcre2_code_free(code_); }

int SplitRegex::next(std::string_view text, std::size_t offset, RegexScratch& scratch,
                     std::size_t& start, std::size_t& end) const {
  const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), offset,
                             PCRE2_NO_UTF_CHECK, scratch.match_data(), scratch.context());
  if (rc == PCRE2_ERROR_NOMATCH) return 0;
  if (rc < 0) return -1;
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.match_data());
  start = ov[0];
  end = ov[1];
  return 1;
}

int SplitRegex::next_in_window(std::string_view text, std::size_t from, std::size_t window_end,
                               RegexScratch& scratch, std::size_t& start, std::size_t& end) const {
  const bool whole = window_end >= text.size();
  const std::uint32_t options = PCRE2_NO_UTF_CHECK | (whole ? 0 : PCRE2_PARTIAL_HARD);
  const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()),
                             whole ? text.size() : window_end, from, options, scratch.match_data(),
                             scratch.context());
  if (rc == PCRE2_ERROR_NOMATCH) return 0;
  if (rc == PCRE2_ERROR_PARTIAL) return 2;
  if (rc < 0) return -1;
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.match_data());
  start = ov[0];
  end = ov[1];
  return 1;
}

}  // namespace ic::tokenizer
