#include "gateway/prompt_tokens.hh"

#include "gateway/segment_tokens.hh"
#include "prompt_text/encoder.hh"

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

PromptTokensJob::PromptTokensJob(const prompt_text::ModelSet* models, InferenceBody&& body,
                                 std::size_t max_ids)
    : models_(models), body_(std::move(body)), max_ids_(max_ids) {}

std::optional<TokensError> PromptTokensJob::start() {
  started_ = true;
  if (body_.prompt_is_ids) {
    if (body_.prompt_ids.size() > max_ids_) return TokensError::kTooLong;
    ids_ = body_.prompt_ids;
    return TokensError::kNone;
  }
  model_ = models_ != nullptr ? models_->find(body_.model) : nullptr;
  if (model_ == nullptr) return TokensError::kUnknownModel;
  text_ = body_.prompt;
  if (body_.chat) {
    std::string error;
    if (!render_chat(*model_, body_, rendered_, error)) return TokensError::kTemplate;
    text_ = rendered_;
  } else {
    // A completion's prompt gets the tokenizer's special tokens (prompt_tokens).
    ids_.assign(model_->single_prefix.begin(), model_->single_prefix.end());
  }
  model_->tokenizer->split_added(text_, [this](std::string_view run, const tokenizer::TokenId* id) {
    runs_.push_back({run, id != nullptr ? static_cast<std::int64_t>(*id) : -1});
  });
  return std::nullopt;
}

std::optional<TokensError> PromptTokensJob::step(const std::function<bool()>& stop) {
  if (!started_) {
    if (stop && stop()) return std::nullopt;
    if (auto done = start()) return done;
  }
  SegmentTokens& cache = SegmentTokens::local();
  const tokenizer::Tokenizer& tok = *model_->tokenizer;
  for (; next_ < runs_.size(); ++next_) {
    const Run& run = runs_[next_];
    if (run.id >= 0) {
      ids_.push_back(static_cast<std::uint32_t>(run.id));
      continue;
    }
    if (!run_encoding_) {
      if (stop && stop()) return std::nullopt;
      if (cache.lookup(tok, run.text, ids_)) continue;
      run_encoding_.emplace(tok, run.text, run_ids_);
    }
    switch (run_encoding_->step(prompt_text::thread_workspace(), stop)) {
      case tokenizer::EncodeStatus::kOk:
        break;
      case tokenizer::EncodeStatus::kPaused:
      case tokenizer::EncodeStatus::kDeadline:
        return std::nullopt;
      case tokenizer::EncodeStatus::kTooLong:
      default:
        return TokensError::kTokenize;
    }
    run_encoding_.reset();
    cache.remember(tok, run.text, run_ids_);
    ids_.insert(ids_.end(), run_ids_.begin(), run_ids_.end());
  }
  if (!body_.chat)
    ids_.insert(ids_.end(), model_->single_suffix.begin(), model_->single_suffix.end());
  return ids_.size() > max_ids_ ? TokensError::kTooLong : TokensError::kNone;
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
