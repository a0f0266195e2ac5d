#pragma once
// prompt_text → token ids (docs/lookup.md step 5, docs/prompt-text.md): the
// text becomes one user message, the model's chat template renders it with
// the generation prompt, and the tokenizer encodes the rendered prompt
// (without adding special tokens: the template wrote them).

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "prompt_text/models.hh"

namespace ic::prompt_text {

enum class EncodeResult {
  kOk,
  kTemplate,  // the template's render failed (raise_exception, a limit)
  kTokenize,  // invalid UTF-8 or the split regex gave up
  kTimeout,   // `expired` turned true
};

// Replaces `out` with the prompt's tokens. Uses this thread's scratch
// buffers (one set per reactor thread, reused), so no I/O and, once warm,
// few allocations. `expired` (may be empty) is polled while tokenizing.
EncodeResult encode_prompt(const Model& model, std::string_view text,
                           const std::function<bool()>& expired, std::vector<std::uint32_t>& out);

// The rendered chat prompt for `text` (one user message, generation prompt).
// False + `error` when the template fails.
bool render_prompt(const Model& model, std::string_view text, std::string& out, std::string& error);

}  // namespace ic::prompt_text
