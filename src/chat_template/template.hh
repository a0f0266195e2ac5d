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
#include <vector>

#include "chat_template/ast.hh"
#include "chat_template/value.hh"

namespace ic::chat_template {

// Render limits: output size (bytes), loop iterations over the whole render,
// nested macro calls.
inline constexpr std::size_t kMaxOutputBytes = 8u << 20;
inline constexpr std::size_t kMaxLoopIterations = 1'000'000;
inline constexpr int kMaxMacroDepth = 32;
// Macro calls per render: recursion stays within kMaxMacroDepth, but two
// calls per level are 2^depth calls; this bounds the render's time.
inline constexpr std::size_t kMaxMacroCalls = 100'000;
// Nesting a source may have, counted as blocks, expressions and prefix
// operators (a parenthesis is three: its expression, `not` and unary levels);
// the parser and the renderer recurse, so deeper is a parse error (about 340
// parentheses, far beyond any chat template).
inline constexpr int kMaxNesting = 1024;

// What one render tells about the reads of some top-scope names (a prompt
// template's volatile variables, src/templates): where the output stood at
// the first read, and how much output came from `{{ }}` that read one.
struct RenderProbe {
  // Names watched, looked up in the outermost scope (variables and globals);
  // a local that shadows one is not a read of it.
  std::vector<std::string> watched;
  // Bytes of the final output written when the first watched read happened
  // (a macro's own output counts only once its call's result is written);
  // npos when none was read. Nothing before it depends on a watched value.
  std::size_t first_read = std::string::npos;
  // Bytes written by top-level `{{ }}` statements whose evaluation read a
  // watched name (a volatile variable's own output, roughly).
  std::size_t watched_output_bytes = 0;
};

// Bounds and probe of one render.
struct RenderOptions {
  // Output size limit (bytes, ≤ kMaxOutputBytes): over it the render fails.
  std::size_t max_output_bytes = kMaxOutputBytes;
  // nullptr: no probing.
  RenderProbe* probe = nullptr;
};

class Template {
 public:
  // nullptr + `error` ("line N: …") when `source` is outside the subset.
  static std::unique_ptr<Template> parse(std::string_view source, std::string& error);

  // Renders with `variables` (plus the globals) into `out`; false + `error`
  // on a render error (raise_exception's message, a type error, a limit).
  bool render(const Dict& variables, std::string& out, std::string& error) const;
  // The same with `options`' output limit and probe.
  bool render(const Dict& variables, std::string& out, std::string& error,
              const RenderOptions& options) const;

 private:
  Body body_;
};

}  // namespace ic::chat_template
