#include "tokenizer/byte_level.hh"

#include <array>

#include "tokenizer/utf8.hh"

namespace ic::tokenizer {
namespace {

bool printable(unsigned b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<char32_t, 256> to_cp{};
  // Inverse over the alphabet: code points 0..323 (256 + 68 others).
  std::array<int, 324> to_byte{};
  Tables() {
    to_byte.fill(-1);
    char32_t next = 256;
    for (unsigned b = 0; b < 256; ++b) {
      to_cp[b] = printable(b) ? static_cast<char32_t>(b) : next++;
      to_byte[to_cp[b]] = static_cast<int>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_code_point(unsigned char b) { return tables().to_cp[b]; }

std::optional<std::string> decode_byte_level(std::string_view token) {
  if (!valid_utf8(token)) return std::nullopt;
  const Tables& t = tables();
  std::string out;
  out.reserve(token.size());
  std::size_t i = 0;
  while (i < token.size()) {
    const char32_t cp = next_code_point(token, i);
    if (cp >= t.to_byte.size() || t.to_byte[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(t.to_byte[cp]));
  }
  return out;
}

}  // namespace ic::tokenizer
