#pragma once
// The two JSON spellings the logger writes (RFC 8259 §7 strings, §6
// numbers), by hand so that src/base/ needs no JSON library. They spell
// exactly what nlohmann::json's dump() does with error_handler_t::replace and
// ensure_ascii off, which the log lines were written with before.

#include <string>
#include <string_view>

namespace ic::base {

// Appends `text` as a quoted JSON string: '"' and '\\' escaped, \b \f \n \r
// \t by name, other bytes below 0x20 as \u00xx (lowercase hex), valid UTF-8
// as is; each invalid or truncated UTF-8 sequence becomes one U+FFFD (the
// maximal-subpart rule of Unicode 15 §3.9, as nlohmann's decoder does).
void append_json_string(std::string& out, std::string_view text);

// Appends `value` laid out as nlohmann::json dumps a double: "2.0" for an
// integral value, an exponent ("1e+20", "1.5e-05") outside 1e-5 .. 1e15, and
// "null" for NaN and ±Inf (JSON has no spelling for them). The digits are the
// shortest that read back the same (std::to_chars); nlohmann's Grisu2 gives a
// 17th digit for a few values where 16 suffice, the same double either way.
void append_json_double(std::string& out, double value);

}  // namespace ic::base
