#include "prompt_text/encoder.hh"

#include <string>

namespace ic::prompt_text {
tokenizer::Workspace& thread_workspace() {
  thread_local tokenizer::Workspace workspace;
  return workspace;
}

bool render_prompt(const Model& model, std::string_view text, std::string& out,
                   std::string& error) {
  using chat_template::Dict;
  using chat_template::List;
  using chat_template::Value;
  Dict variables = {
      {"messages",
       Value(List{Value(Dict{{"role", Value("user")}, {"content", Value(std::string(text))}})})},
      {"add_generation_prompt", Value(true)}};
  variables.insert(variables.end(), model.special_tokens.begin(), model.special_tokens.end());
  return model.chat_template->render(variables, out, error);
}

PromptEncoding::PromptEncoding(const Model& model, std::string_view text,
                               std::vector<std::uint32_t>& out)
    : model_(model), text_(text), out_(out) {
  out_.clear();
}

EncodeResult PromptEncoding::step(const std::function<bool()>& stop) {
  if (!encoding_) {
    if (stop && stop()) return EncodeResult::kPaused;
    std::string error;
    if (!render_prompt(model_, text_, prompt_, error)) return EncodeResult::kTemplate;
    encoding_.emplace(*model_.tokenizer, prompt_, out_);
  }
  switch (encoding_->step(thread_workspace(), stop)) {
    case tokenizer::EncodeStatus::kOk:
      return EncodeResult::kOk;
    case tokenizer::EncodeStatus::kPaused:
    case tokenizer::EncodeStatus::kDeadline:
      return EncodeResult::kPaused;
    case tokenizer::EncodeStatus::kTooLong:
      return EncodeResult::kTooLong;
    default:
      return EncodeResult::kTokenize;
  }
}

EncodeResult encode_prompt(const Model& model, std::string_view text,
                           const std::function<bool()>& expired, std::vector<std::uint32_t>& out) {
  PromptEncoding job(model, text, out);
  const EncodeResult r = job.step(expired);
  return r == EncodeResult::kPaused ? EncodeResult::kTimeout : r;
}

}  // namespace ic::prompt_text
