#pragma once
// The tokenizer.json normalizers we support: none, or Unicode NFC (Qwen2/3),
// via utf8proc (Unicode Standard Annex #15).

#include <string>
#include <string_view>

namespace ic::tokenizer {

enum class NfcResult {
  kUnchanged,  // already NFC by the quick check; `out` untouched
  kWritten,    // the NFC form is in `out`
  kFailed,     // utf8proc rejected the text (not valid UTF-8)
};

// The NFC form of `text`. The quick check: text without a code point at or
// above U+0300 (the first that can decompose or combine) is its own NFC.
NfcResult to_nfc(std::string_view text, std::string& out);

// True when NFC never joins anything before `cp` with `cp` or what follows:
// `cp` is below U+0300, or has canonical combining class 0, no decomposition,
// takes part in no canonical composition and is not a Hangul jamo. Then
// NFC(a + b) = NFC(a) + NFC(b) for any b starting with `cp` (a safe place to
// cut a text into pieces normalized one at a time).
bool nfc_cut_before(char32_t cp);

}  // namespace ic::tokenizer
