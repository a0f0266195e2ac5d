#pragma once
// The byte-level alphabet of GPT-2 style BPE (tokenizers' ByteLevel
// pre-tokenizer, "bytes_to_unicode"): every byte 0..255 is shown as one
// printable code point, so vocabulary and merge strings are text. We keep raw
// bytes internally and translate the vocabulary once at load time.

#include <optional>
#include <string>
#include <string_view>

namespace ic::tokenizer {

// The code point that stands for byte `b` in vocabulary strings: the byte
// itself for '!'..'~', '¡'..'¬', '®'..'ÿ'; 256 + n for the n-th other byte.
char32_t byte_to_code_point(unsigned char b);

// Decodes a vocabulary string (UTF-8 of byte-level code points) into the raw
// bytes it stands for; nullopt when it holds a code point outside the
// alphabet or is not valid UTF-8 (such entries can never be produced).
std::optional<std::string> decode_byte_level(std::string_view token);

}  // namespace ic::tokenizer
