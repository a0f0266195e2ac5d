#include "gateway/prompt_tokens.hh"

#include "gateway/segment_tokens.hh"

namespace ic::gateway {

bool render_chat(const prompt_text::Model& model, const InferenceBody& body, std::string& out,
                 std::string& error) {
  using chat_template::Dict;
  using chat_template::Value;
  Dict variables = {{"messages", body.messages}, {"add_generation_prompt", Value(true)}};
  if (body.has_tools) variables.emplace_back("tools", body.tools);
  variables.insert(variables.end(), model.special_tokens.begin(), model.special_tokens.end());
  out.clear();
  return model.chat_template->render(variables, out, error);
}

TokensError prompt_tokens(const prompt_text::ModelSet* models, const InferenceBody& body,
                          std::size_t max_ids, const std::function<bool()>& expired,
                          std::vector<std::uint32_t>& out) {
  out.clear();
  if (body.prompt_is_ids) {
    if (body.prompt_ids.size() > max_ids) return TokensError::kTooLong;
    out = body.prompt_ids;
    return TokensError::kNone;
  }
  const prompt_text::Model* model = models != nullptr ? models->find(body.model) : nullptr;
  if (model == nullptr) return TokensError::kUnknownModel;
  thread_local std::string rendered;
  std::string_view text = body.prompt;
  if (body.chat) {
    std::string error;
    if (!render_chat(*model, body, rendered, error)) return TokensError::kTemplate;
    text = rendered;
  }
  const auto status = SegmentTokens::local().encode(*model->tokenizer, text, out, expired);
  // A huge render is not kept for the next request.
  if (rendered.capacity() > (1u << 20)) std::string().swap(rendered);
  switch (status) {
    case tokenizer::EncodeStatus::kOk:
      // A completion's prompt gets the tokenizer's special tokens, as the
      // engine encodes it (a chat template writes its own).
      if (!body.chat) {
        out.insert(out.begin(), model->single_prefix.begin(), model->single_prefix.end());
        out.insert(out.end(), model->single_suffix.begin(), model->single_suffix.end());
      }
      return out.size() > max_ids ? TokensError::kTooLong : TokensError::kNone;
    case tokenizer::EncodeStatus::kDeadline:
    case tokenizer::EncodeStatus::kPaused:
      return TokensError::kTimeout;
    default:
      return TokensError::kTokenize;
  }
}

std::string_view to_label(TokensError error) {
  switch (error) {
    case TokensError::kNone:
      return "none";
    case TokensError::kUnknownModel:
      return "unknown_model";
    case TokensError::kTemplate:
      return "template";
    case TokensError::kTokenize:
      return "tokenize";
    case TokensError::kTooLong:
      return "too_long";
    case TokensError::kTimeout:
      return "timeout";
  }
  return "none";
}

}  // namespace ic::gateway
