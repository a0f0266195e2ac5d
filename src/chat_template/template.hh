#pragma once
// A chat template (tokenizer_config.json "chat_template") in the Jinja subset
// chat templates use (docs/prompt-text.md "Chat template"): text, {{ }},
// if/elif/else, for (loop.*, else, inline if, break/continue), set (names,
// namespace attributes, blocks), macro, generation; Python-semantics
// expressions, filters, tests and string/dict methods; raise_exception,
// namespace, range, strftime_now, dict. Rendered with the environment
// transformers uses (trim_blocks, lstrip_blocks, no trailing newline).
//
// Parsing is strict: an unsupported statement, filter or test fails parse()
// with the line, so a model whose template we cannot render faithfully is
// never loaded. Rendering is bounded (kMaxOutputBytes, kMaxLoopIterations,
// kMaxMacroDepth) and reports errors instead of throwing.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "chat_template/ast.hh"
#include "chat_template/value.hh"

namespace ic::chat_template {

// Render limits: output size (bytes), loop iterations over the whole render,
// nested macro calls.
inline constexpr std::size_t kMaxOutputBytes = 8u << 20;
inline constexpr std::size_t kMaxLoopIterations = 1'000'000;
inline constexpr int kMaxMacroDepth = 32;

class Template {
 public:
  // nullptr + `error` ("line N: …") when `source` is outside the subset.
  static std::unique_ptr<Template> parse(std::string_view source, std::string& error);

  // Renders with `variables` (plus the globals) into `out`; false + `error`
  // on a render error (raise_exception's message, a type error, a limit).
  bool render(const Dict& variables, std::string& out, std::string& error) const;

 private:
  Body body_;
};

}  // namespace ic::chat_template
