#pragma once
// The OpenAI-compatible request bodies the endpoint picker reads
// (docs/gateway.md "Bodies"), parsed with nlohmann_json:
//   /v1/chat/completions  {"model", "messages": [{"role", "content", ...}], "tools"?}
//     role system | user | assistant | tool | developer; content a string, a
//     list of {"type":"text","text"} parts, or null (assistant tool calls);
//     every other member (tool_calls, tool_call_id, name, reasoning_content)
//     is handed to the chat template as it came.
//   /v1/completions       {"model", "prompt": "text" | [token ids] | ["text"]}
// Any other path is read by its members: "messages" → chat, "prompt" →
// completion. The JSON is converted to the template's values (chat_template::
// Value) with its nesting bounded (kMaxDepth), so a hostile body costs no
// more than its bytes.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat_template/value.hh"

namespace ic::gateway {

// Deepest JSON nesting converted; deeper bodies are refused (kNotJson).
inline constexpr int kMaxDepth = 64;

// Why a body gave nothing to pick with (the pick then goes by load,
// counted by this reason: docs/gateway.md "Fail open").
enum class BodyError : std::uint8_t {
  kNone,
  kNotJson,   // not JSON, nested deeper than kMaxDepth, or not an object
  kNoModel,   // "model" missing or not a string
  kNoPrompt,  // neither "messages" (a list of objects) nor a usable "prompt"
};

struct InferenceBody {
  std::string model;
  bool chat = false;
  // chat: the messages and (when present) the tools, as template values.
  chat_template::Value messages;
  chat_template::Value tools;
  bool has_tools = false;
  // completion: the prompt text, or its token ids when given as ids.
  std::string prompt;
  std::vector<std::uint32_t> prompt_ids;
  bool prompt_is_ids = false;
};

// Parses `body` (request :path `path`) into `out`.
BodyError parse_body(std::string_view path, std::string_view body, InferenceBody& out);

std::string_view to_label(BodyError error);

}  // namespace ic::gateway
