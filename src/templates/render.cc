#include "templates/render.hh"

#include <chrono>

#include "templates/stable_prefix.hh"
#include "templates/variables.hh"

namespace ic::templates {
namespace {

std::int64_t steady_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool render_template(const PromptTemplate& t, std::span<const VariableView> variables,
                     const prompt_text::ModelSet* models, const RenderLimits& limits, Rendered& out,
                     std::string& error) {
  const std::int64_t deadline_us = steady_us() + limits.tokenize_budget_us;
  chat_template::Dict values;
  if (!typed_variables(t, variables, values, error)) return false;
  const prompt_text::Model* model = models != nullptr ? models->find(t.model_id) : nullptr;
  if (model == nullptr) {
    error = "no tokenizer loaded for model \"" + t.model_id + "\"";
    return false;
  }
  chat_template::RenderProbe probe;
  probe.watched = t.volatile_names;
  const chat_template::RenderOptions options{.max_output_bytes = limits.max_rendered_bytes,
                                             .probe = &probe};
  if (!t.compiled->render(values, out.prompt, error, options)) {
    out.prompt.clear();
    return false;
  }
  const std::size_t size = out.prompt.size();
  out.volatile_byte_offset = std::min(probe.first_read, size);
  out.stable_cut_bytes = stable_cut(out.prompt, out.volatile_byte_offset);
  StablePrefix prefix;
  const auto expired = [deadline_us] { return steady_us() > deadline_us; };
  switch (stable_prefix(*model->tokenizer, t.revision,
                        std::string_view(out.prompt).substr(0, out.stable_cut_bytes), t.block_size,
                        expired, prefix)) {
    case PrefixStatus::kOk:
      break;
    case PrefixStatus::kTimeout:
      error = "tokenizing the stable prefix took longer than its budget";
      out.prompt.clear();
      return false;
    case PrefixStatus::kTokenize:
      error = "the tokenizer refused the stable prefix (a pre-token over its bound)";
      out.prompt.clear();
      return false;
  }
  out.volatile_token_offset = prefix.tokens;
  out.stable_token_count = prefix.block_tokens;
  out.stable_prefix_hash = std::move(prefix.hash);
  const std::size_t after = size - out.volatile_byte_offset;
  out.stable_bytes_after_volatile =
      after > probe.watched_output_bytes ? after - probe.watched_output_bytes : 0;
  out.cache_bust = out.stable_bytes_after_volatile >= limits.cache_bust_bytes;
  return true;
}

}  // namespace ic::templates
