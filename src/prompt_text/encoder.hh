#pragma once
// prompt_text → token ids (docs/lookup.md step 5, docs/prompt-text.md): the
// text becomes one user message, the model's chat template renders it with
// the generation prompt, and the tokenizer encodes the rendered prompt
// (without adding special tokens: the template wrote them).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "prompt_text/models.hh"
#include "tokenizer/encoding.hh"

namespace ic::prompt_text {

// This reactor thread's tokenizer workspace (nothing of it is kept between
// two encodes or two steps of a job): every tokenizing on the thread shares it.
tokenizer::Workspace& thread_workspace();

enum class EncodeResult {
  kOk,
  kTemplate,  // the template's render failed (raise_exception, a limit)
  kTokenize,  // invalid UTF-8 or the split regex gave up
  kTooLong,   // a pre-token or an NFC stretch over its bound (tokenizer/encoding.hh)
  kTimeout,   // `expired` turned true
  kPaused,    // PromptEncoding::step() stopped; step() again to go on
};

// Replaces `out` with the prompt's tokens in one go. Uses this thread's
// scratch buffers (one set per reactor thread, reused), so no I/O and, once
// warm, few allocations. `expired` (may be empty) is polled while
// tokenizing (tokenizer::Encoding's units).
EncodeResult encode_prompt(const Model& model, std::string_view text,
                           const std::function<bool()>& expired, std::vector<std::uint32_t>& out);

// The same as a job run in slices: the first step renders the template
// (one piece: bounded by the template's own limits), the following ones run
// the tokenizer's units. `text` and `out` are kept by the caller until done.
class PromptEncoding {
 public:
  PromptEncoding(const Model& model, std::string_view text, std::vector<std::uint32_t>& out);
  // Runs until the prompt is encoded, a failure, or `stop()` returns true
  // (polled between units, tokenizer::Encoding::step): then kPaused.
  EncodeResult step(const std::function<bool()>& stop);

 private:
  const Model& model_;
  std::string_view text_;
  std::vector<std::uint32_t>& out_;
  std::string prompt_;
  std::optional<tokenizer::Encoding> encoding_;
};

// The rendered chat prompt for `text` (one user message, generation prompt).
// False + `error` when the template fails.
bool render_prompt(const Model& model, std::string_view text, std::string& out, std::string& error);

}  // namespace ic::prompt_text
