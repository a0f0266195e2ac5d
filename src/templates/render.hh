#pragma once
// One RenderTemplate call's work (docs/templates.md): the request's string
// variables checked against the template's declarations and typed, the
// render (chat_template engine, watching the volatile variables), the stable
// cut, its tokens and fingerprint, and the cache-bust diagnosis. Nothing of
// a failed render is returned.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "prompt_text/models.hh"
#include "templates/stable_prefix.hh"
#include "templates/template_set.hh"

namespace ic::templates {

struct RenderLimits {
  // Largest rendered prompt (bytes): LookupRoute's prompt_text limit.
  std::size_t max_rendered_bytes = 1 << 20;
  // Tokenizing work one render's stable text may take, summed over its
  // steps (µs): about 1 MiB at the tokenizer's benchmarked rate
  // (docs/prompt-text.md). Waiting for a slice does not count: the caller's
  // grpc-timeout bounds that.
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

// render_template() in steps, for the server's slices (prompt_text/scheduler.hh):
// start() types the variables, renders and cuts (one piece, bounded by
// RenderLimits::max_rendered_bytes and the template engine's limits); step()
// tokenizes the stable text unit by unit. Same answers and errors as
// render_template(), however the steps fall.
class TemplateRender {
 public:
  // `t` and `models` outlive the job (`limits` is copied); the variables are read here
  // only. False + `error`: RENDER_ERROR, nothing rendered is kept.
  bool start(const PromptTemplate& t, std::span<const VariableView> variables,
             const prompt_text::ModelSet* models, const RenderLimits& limits, std::string& error);
  // After a successful start(): runs until the stable text is tokenized, a
  // failure or `stop()` (polled between the tokenizer's units) returns true.
  // nullopt: paused, step again; true: result() is the answer; false +
  // `error`: RENDER_ERROR (the tokenizer refused the stable text, or its
  // tokenize_budget_us of work is spent). The first step answers a stable
  // text seen before (stable_prefix.hh's cache) whatever `stop` says.
  std::optional<bool> step(const std::function<bool()>& stop, std::string& error);
  Rendered& result() { return out_; }

 private:
  const PromptTemplate* t_ = nullptr;
  RenderLimits limits_;  // a copy: a caller's temporary may end before the job
  Rendered out_;
  std::size_t watched_output_bytes_ = 0;  // output of the volatile variables
  std::optional<StablePrefixJob> prefix_;
  std::int64_t work_us_ = 0;  // step() time so far
};

}  // namespace ic::templates
