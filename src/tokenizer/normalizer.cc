#include "tokenizer/normalizer.hh"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>

namespace ic::tokenizer {

NfcResult to_nfc(std::string_view text, std::string& out) {
  // Lead bytes below 0xCC start code points below U+0300: none of those
  // decomposes or combines, so such text is its own NFC.
  if (std::none_of(text.begin(), text.end(),
                   [](char c) { return static_cast<unsigned char>(c) >= 0xCC; }))
    return NfcResult::kUnchanged;
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &mapped,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) return NfcResult::kFailed;
  out.assign(reinterpret_cast<const char*>(mapped), static_cast<std::size_t>(n));
  std::free(mapped);
  return NfcResult::kWritten;
}

}  // namespace ic::tokenizer
