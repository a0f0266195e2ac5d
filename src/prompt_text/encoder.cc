#include "prompt_text/encoder.hh"

#include <string>

namespace ic::prompt_text {

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

EncodeResult encode_prompt(const Model& model, std::string_view text,
                           const std::function<bool()>& expired, std::vector<std::uint32_t>& out) {
  // Per reactor thread: the tokenizer's workspace and the rendered prompt.
  thread_local tokenizer::Workspace workspace;
  thread_local std::string prompt;
  std::string error;
  if (!render_prompt(model, text, prompt, error)) return EncodeResult::kTemplate;
  if (expired && expired()) return EncodeResult::kTimeout;
  switch (model.tokenizer->encode(prompt, workspace, out, expired)) {
    case tokenizer::EncodeStatus::kOk:
      return EncodeResult::kOk;
    case tokenizer::EncodeStatus::kDeadline:
      return EncodeResult::kTimeout;
    default:
      return EncodeResult::kTokenize;
  }
}

}  // namespace ic::prompt_text
