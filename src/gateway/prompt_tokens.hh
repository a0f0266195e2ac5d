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
#include <string>
#include <vector>

#include "gateway/openai_body.hh"
#include "prompt_text/models.hh"

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

// The chat prompt of `body` rendered by `model`'s template; false + `error`.
bool render_chat(const prompt_text::Model& model, const InferenceBody& body, std::string& out,
                 std::string& error);

std::string_view to_label(TokensError error);

}  // namespace ic::gateway
