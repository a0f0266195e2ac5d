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

bool TemplateRender::start(const PromptTemplate& t, std::span<const VariableView> variables,
                           const prompt_text::ModelSet* models, const RenderLimits& limits,
                           std::string& error) {
  t_ = &t;
  limits_ = limits;
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
  if (!t.compiled->render(values, out_.prompt, error, options)) {
    out_.prompt.clear();
    return false;
  }
  out_.volatile_byte_offset = std::min(probe.first_read, out_.prompt.size());
  out_.stable_cut_bytes = stable_cut(out_.prompt, out_.volatile_byte_offset);
  watched_output_bytes_ = probe.watched_output_bytes;
  prefix_.emplace(*model->tokenizer, t.revision,
                  std::string_view(out_.prompt).substr(0, out_.stable_cut_bytes), t.block_size);
  return true;
}

std::optional<bool> TemplateRender::step(const std::function<bool()>& stop, std::string& error) {
  const std::int64_t begin = steady_us();
  const std::int64_t budget_end = begin + (limits_.tokenize_budget_us - work_us_);
  const auto paused = [&stop, budget_end] { return steady_us() > budget_end || (stop && stop()); };
  StablePrefix prefix;
  const std::optional<PrefixStatus> status = prefix_->step(paused, prefix);
  work_us_ += steady_us() - begin;
  if (!status && work_us_ < limits_.tokenize_budget_us) return std::nullopt;
  if (!status) {
    error = "tokenizing the stable prefix took longer than its budget";
    out_.prompt.clear();
    return false;
  }
  if (*status == PrefixStatus::kTokenize) {
    error = "the tokenizer refused the stable prefix (a pre-token over its bound)";
    out_.prompt.clear();
    return false;
  }
  out_.volatile_token_offset = prefix.tokens;
  out_.stable_token_count = prefix.block_tokens;
  out_.stable_prefix_hash = std::move(prefix.hash);
  const std::size_t after = out_.prompt.size() - out_.volatile_byte_offset;
  out_.stable_bytes_after_volatile =
      after > watched_output_bytes_ ? after - watched_output_bytes_ : 0;
  out_.cache_bust = out_.stable_bytes_after_volatile >= limits_.cache_bust_bytes;
  return true;
}

bool render_template(const PromptTemplate& t, std::span<const VariableView> variables,
                     const prompt_text::ModelSet* models, const RenderLimits& limits, Rendered& out,
                     std::string& error) {
  TemplateRender job;
  if (!job.start(t, variables, models, limits, error)) {
    out.prompt.clear();
    return false;
  }
  // In one go: only the budget stops it.
  const std::optional<bool> done = job.step({}, error);
  if (!done.value_or(false)) {
    out.prompt.clear();
    return false;
  }
  out = std::move(job.result());
  return true;
}

}  // namespace ic::templates
