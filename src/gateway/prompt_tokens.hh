#pragma once
// An OpenAI body → the prompt's token ids, as the model server will see them
// (docs/gateway.md "Bodies"): a chat's whole conversation rendered by the
// model's chat template (every message, the tools, the generation prompt,
// the special tokens of tokenizer_config.json, as transformers'
// apply_chat_template does), then tokenized without adding special tokens;
// a completion's prompt text tokenized with the special tokens the tokenizer
// adds (prompt_text::Model::single_prefix / single_suffix: a BOS where the
// tokenizer adds one), or its token ids taken as given. Runs seen before reuse their ids
// (gateway/segment_tokens.hh).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/openai_body.hh"
#include "prompt_text/models.hh"
#include "tokenizer/encoding.hh"

namespace ic::gateway {

// Why a parsed body gave no token ids (counted; the pick goes by load).
enum class TokensError : std::uint8_t {
  kNone,
  kUnknownModel,  // no tokenizer loaded for the body's model
  kTemplate,      // the chat template failed to render
  kTokenize,      // invalid UTF-8, a pre-token over its bound, the regex gave up
  kTooLong,       // more ids than max_ids
  kTimeout,       // `expired` turned true
};

// Replaces `out` with the prompt ids of `body`. `models` may be nullptr
// (every chat / text prompt: kUnknownModel); `expired` (may be empty) is
// polled while tokenizing; more than `max_ids` ids is kTooLong.
TokensError prompt_tokens(const prompt_text::ModelSet* models, const InferenceBody& body,
                          std::size_t max_ids, const std::function<bool()>& expired,
                          std::vector<std::uint32_t>& out);

// prompt_tokens() as a job run in steps (the server's slices,
// prompt_text/scheduler.hh; docs/gateway.md "Where tokenizing runs"): the
// first step renders the chat template (one piece, bounded by the template's
// limits) and cuts the prompt at its added tokens; then each run between
// them comes from this core's SegmentTokens or is tokenized unit by unit
// (tokenizer/encoding.hh) and kept there. `stop()` is polled between runs
// and between the tokenizer's units. The same ids and errors as
// prompt_tokens(), however the steps fall (kTimeout is the caller's: it
// stops stepping).
class PromptTokensJob {
 public:
  // `models` outlives the job (may be nullptr: kUnknownModel).
  PromptTokensJob(const prompt_text::ModelSet* models, InferenceBody&& body, std::size_t max_ids);
  PromptTokensJob(const PromptTokensJob&) = delete;
  PromptTokensJob& operator=(const PromptTokensJob&) = delete;

  // Done: the outcome (kNone: ids() holds the prompt ids); nullopt when
  // `stop()` paused it (step again to go on).
  std::optional<TokensError> step(const std::function<bool()>& stop);
  std::vector<std::uint32_t>& ids() { return ids_; }

 private:
  struct Run {
    std::string_view text;  // in text_
    std::int64_t id;        // an added token's id, or -1 for ordinary text
  };
  std::optional<TokensError> start();

  const prompt_text::ModelSet* models_;
  InferenceBody body_;
  std::size_t max_ids_;
  const prompt_text::Model* model_ = nullptr;
  bool started_ = false;
  std::string rendered_;   // the chat prompt
  std::string_view text_;  // the prompt to tokenize (rendered_ or body_.prompt)
  std::vector<Run> runs_;
  std::size_t next_ = 0;  // the run being made
  std::vector<std::uint32_t> ids_;
  std::vector<std::uint32_t> run_ids_;               // the long run being tokenized
  std::optional<tokenizer::Encoding> run_encoding_;  // its units
};

// The chat prompt of `body` rendered by `model`'s template; false + `error`.
bool render_chat(const prompt_text::Model& model, const InferenceBody& body, std::string& out,
                 std::string& error);

std::string_view to_label(TokensError error);

}  // namespace ic::gateway
