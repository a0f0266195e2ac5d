#include "base/json_text.hh"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace ic::base {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// Length of the well-formed UTF-8 sequence at the start of `s` (Unicode 15
// table 3-7), or 0 when it is not one; `*valid_prefix` is then how many of
// its bytes form a maximal subpart (replaced by one U+FFFD together).
std::size_t utf8_sequence(std::string_view s, std::size_t* valid_prefix) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(0);
  std::size_t length = 0;
  unsigned char low = 0x80;  // bounds of the second byte
  unsigned char high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // no overlong forms
    if (lead == 0xED) high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // no overlong forms
    if (lead == 0xF4) high = 0x8F;  // nothing above U+10FFFF
  } else {
    *valid_prefix = 1;  // a stray continuation byte, C0, C1 or F5..FF
    return 0;
  }
  for (std::size_t i = 1; i < length; ++i) {
    const bool ok =
        i < s.size() && byte(i) >= (i == 1 ? low : 0x80) && byte(i) <= (i == 1 ? high : 0xBF);
    if (!ok) {
      *valid_prefix = i;  // the failing byte starts over on its own
      return 0;
    }
  }
  return length;
}

void append_escaped_ascii(std::string& out, char ch) {
  switch (ch) {
    case '"':
      out += "\\\"";
      return;
    case '\\':
      out += "\\\\";
      return;
    case '\b':
      out += "\\b";
      return;
    case '\f':
      out += "\\f";
      return;
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    default:
      break;
  }
  if (static_cast<unsigned char>(ch) < 0x20) {
    constexpr char kHex[] = "0123456789abcdef";
    out += "\\u00";
    out += kHex[static_cast<unsigned char>(ch) >> 4];
    out += kHex[static_cast<unsigned char>(ch) & 0xF];
    return;
  }
  out += ch;
}

}  // namespace

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  while (!text.empty()) {
    if (static_cast<unsigned char>(text.front()) < 0x80) {
      append_escaped_ascii(out, text.front());
      text.remove_prefix(1);
      continue;
    }
    std::size_t valid_prefix = 0;
    const std::size_t length = utf8_sequence(text, &valid_prefix);
    if (length == 0) {
      out += kReplacement;
      text.remove_prefix(std::min(valid_prefix, text.size()));
      continue;
    }
    out += text.substr(0, length);
    text.remove_prefix(length);
  }
  out += '"';
}

void append_json_double(std::string& out, double value) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  // Shortest round-trip digits as d.ddde±x, then laid out the way nlohmann's
  // dtoa_impl::format_buffer does (fixed between 1e-5 and 1e15).
  char sci[32];
  const auto [end, ec] = std::to_chars(sci, sci + sizeof sci, value, std::chars_format::scientific);
  const std::string_view text(sci, static_cast<std::size_t>(end - sci));
  const std::size_t e_at = text.find('e');
  std::string_view mantissa = text.substr(0, e_at);
  const int exponent = std::atoi(std::string(text.substr(e_at + 1)).c_str());
  if (!mantissa.empty() && mantissa.front() == '-') {
    out += '-';
    mantissa.remove_prefix(1);
  }
  std::string digits;
  for (char ch : mantissa) {
    if (ch != '.') digits += ch;
  }
  const int k = static_cast<int>(digits.size());
  const int n = exponent + 1;  // position of the decimal point after the digits' start
  if (k <= n && n <= 15) {
    out += digits;
    out.append(static_cast<std::size_t>(n - k), '0');
    out += ".0";
  } else if (0 < n && n <= 15) {
    out += std::string_view(digits).substr(0, static_cast<std::size_t>(n));
    out += '.';
    out += std::string_view(digits).substr(static_cast<std::size_t>(n));
  } else if (-4 < n && n <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-n), '0');
    out += digits;
  } else {
    out += digits.front();
    if (k > 1) {
      out += '.';
      out += std::string_view(digits).substr(1);
    }
    const int e = n - 1;
    out += e < 0 ? "e-" : "e+";
    const int magnitude = e < 0 ? -e : e;
    if (magnitude < 10) out += '0';
    out += std::to_string(magnitude);
  }
}

}  // namespace ic::base
