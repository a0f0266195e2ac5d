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

bool nfc_cut_before(char32_t cp) {
  if (cp < 0x300) return true;
  const bool jamo = (cp >= 0x1100 && cp <= 0x11FF) || (cp >= 0xA960 && cp <= 0xA97F) ||
                    (cp >= 0xD7B0 && cp <= 0xD7FF);
  if (jamo) return false;
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
  return p->combining_class == 0 && p->decomp_seqindex == UINT16_MAX && p->comb_index == UINT16_MAX;
}

}  // namespace ic::tokenizer
