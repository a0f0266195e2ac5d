#pragma once
// One RenderTemplate call's work (docs/templates.md): the request's string
// variables checked against the template's declarations and typed, the
// render (chat_template engine, watching the volatile variables), the stable
// cut, its tokens and fingerprint, and the cache-bust diagnosis. Nothing of
// a failed render is returned.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "prompt_text/models.hh"
#include "templates/template_set.hh"

namespace ic::templates {

struct RenderLimits {
  // Largest rendered prompt (bytes): LookupRoute's prompt_text limit.
  std::size_t max_rendered_bytes = 1 << 20;
  // Tokenizing budget of one render's stable text (µs, wall): about 1 MiB
  // at the tokenizer's benchmarked rate (docs/prompt-text.md).
  std::int64_t tokenize_budget_us = 100'000;
  // A render is a cache bust when at least this many stable bytes follow
  // the start of its volatile part (docs/templates.md "Cache-bust diagnosis").
  std::size_t cache_bust_bytes = 1024;
};

// One variable as the request gives it: name, value.
using VariableView = std::pair<std::string_view, std::string_view>;

struct Rendered {
  std::string prompt;
  // Where the first volatile variable's output can begin (bytes); the
  // prompt's size when none was read.
  std::size_t volatile_byte_offset = 0;
  // The stable cut (stable_prefix.hh), bytes; ≤ volatile_byte_offset.
  std::size_t stable_cut_bytes = 0;
  // Tokens of prompt[0, stable_cut_bytes): the leading tokens every call
  // with the same stable text shares.
  std::int32_t volatile_token_offset = 0;
  // Tokens of the whole KV blocks among them: what stable_prefix_hash covers.
  std::int32_t stable_token_count = 0;
  // `vllm` scheme prefix hash of those blocks (8 bytes), empty without one.
  std::string stable_prefix_hash;
  // Rendered bytes after volatile_byte_offset not written by a volatile
  // variable: stable text that a prefix cache cannot reuse.
  std::size_t stable_bytes_after_volatile = 0;
  // stable_bytes_after_volatile ≥ RenderLimits::cache_bust_bytes.
  bool cache_bust = false;
};

// Renders `t` with `variables`. False + `error` (for RENDER_ERROR): a
// declared variable missing, an undeclared one given or one given twice, a
// value not of its type, a render error (raise_exception, a type error, an
// int64 overflow, a limit), a prompt over max_rendered_bytes, no tokenizer loaded for the
// model, a stable text the tokenizer refuses, or the tokenizing budget spent.
// `models` nullptr: no tokenizer for any model.
bool render_template(const PromptTemplate& t, std::span<const VariableView> variables,
                     const prompt_text::ModelSet* models, const RenderLimits& limits, Rendered& out,
                     std::string& error);

}  // namespace ic::templates
