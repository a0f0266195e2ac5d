#pragma once
// Minimal UTF-8 helpers for the tokenizer (RFC 3629).

#include <cstddef>
#include <string>
#include <string_view>

namespace ic::tokenizer {

// True when `s` is well-formed UTF-8 (no overlongs, surrogates or code points
// above U+10FFFF).
bool valid_utf8(std::string_view s);

// Appends the UTF-8 encoding of `cp` (≤ U+10FFFF) to `out`.
void append_utf8(std::string& out, char32_t cp);

// Decodes the code point at `s[i]` (well-formed input) and advances `i`.
char32_t next_code_point(std::string_view s, std::size_t& i);

}  // namespace ic::tokenizer
