#include "gateway/openai_body.hh"

#include <nlohmann/json.hpp>

#include "gateway/json_outline.hh"
#include "gateway/message_cache.hh"

#include <limits>
#include <optional>

namespace ic::gateway {
namespace {

using json = nlohmann::json;
using chat_template::Dict;
using chat_template::List;
using chat_template::Value;

// JSON → template value, strings moved out of `j` (the body's text is copied
// once, by the parser); nullopt past kMaxDepth.
std::optional<Value> to_value(json& j, int depth) {
  if (depth > kMaxDepth) return std::nullopt;
  switch (j.type()) {
    case json::value_t::null:
      return Value(chat_template::None{});
    case json::value_t::boolean:
      return Value(j.get<bool>());
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return Value(static_cast<std::int64_t>(j.get<std::int64_t>()));
    case json::value_t::number_float:
      return Value(j.get<double>());
    case json::value_t::string:
      return Value(std::move(j.get_ref<std::string&>()));
    case json::value_t::array: {
      List list;
      list.reserve(j.size());
      for (json& e : j) {
        auto v = to_value(e, depth + 1);
        if (!v) return std::nullopt;
        list.push_back(std::move(*v));
      }
      return Value(std::move(list));
    }
    case json::value_t::object: {
      Dict dict;
      dict.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        auto v = to_value(it.value(), depth + 1);
        if (!v) return std::nullopt;
        dict.emplace_back(it.key(), std::move(*v));
      }
      return Value(std::move(dict));
    }
    default:
      return std::nullopt;  // binary / discarded: never from parse
  }
}

// Text of a content given as a list of parts: its text parts concatenated
// (what vLLM's chat renderer gives text-only templates).
std::string joined_text(const json& parts) {
  std::string text;
  for (const json& part : parts) {
    if (!part.is_object()) continue;
    auto t = part.find("text");
    if (t != part.end() && t->is_string()) text += t->get_ref<const std::string&>();
  }
  return text;
}

// One message as the template sees it; nullopt past kMaxDepth.
std::optional<Value> message_value(json& message) {
  Dict dict;
  dict.reserve(message.size());
  for (auto it = message.begin(); it != message.end(); ++it) {
    if (it.key() == "content" && it.value().is_array()) {
      dict.emplace_back(it.key(), Value(joined_text(it.value())));
      continue;
    }
    auto v = to_value(it.value(), 2);
    if (!v) return std::nullopt;
    dict.emplace_back(it.key(), std::move(*v));
  }
  return Value(std::move(dict));
}

BodyError parse_chat(json& doc, InferenceBody& out) {
  auto messages = doc.find("messages");
  if (messages == doc.end() || !messages->is_array() || messages->empty())
    return BodyError::kNoPrompt;
  List list;
  list.reserve(messages->size());
  for (json& m : *messages) {
    if (!m.is_object()) return BodyError::kNoPrompt;
    auto v = message_value(m);
    if (!v) return BodyError::kNotJson;
    list.push_back(std::move(*v));
  }
  out.chat = true;
  out.messages = Value(std::move(list));
  if (auto tools = doc.find("tools"); tools != doc.end() && tools->is_array() && !tools->empty()) {
    auto t = to_value(*tools, 1);
    if (!t) return BodyError::kNotJson;
    out.tools = std::move(*t);
    out.has_tools = true;
  }
  return BodyError::kNone;
}

// A JSON piece of the body parsed by `convert(json&)` (→ optional Value), or
// the value kept from an earlier body with exactly these bytes. nullopt when
// the piece is not JSON or `convert` refuses it (then nothing is kept).
template <typename Convert>
std::optional<Value> piece(std::string_view bytes, Convert convert) {
  MessageCache& cache = MessageCache::local();
  if (auto kept = cache.find(bytes)) return kept;
  json j = json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  auto v = convert(j);
  if (v) cache.insert(bytes, *v);
  return v;
}

// A chat body through its outline: only the pieces not seen before are
// parsed. The template only reads the values, so kept ones are shared.
BodyError parse_chat_outline(const JsonOutline& o, InferenceBody& out) {
  const json model = json::parse(o.model, nullptr, /*allow_exceptions=*/false);
  if (!model.is_string() || model.get_ref<const std::string&>().empty()) return BodyError::kNoModel;
  out.model = model.get_ref<const std::string&>();
  if (o.messages.empty()) return BodyError::kNoPrompt;
  List list;
  list.reserve(o.messages.size());
  for (std::string_view bytes : o.messages) {
    bool object = true;
    auto v = piece(bytes, [&object](json& m) -> std::optional<Value> {
      object = m.is_object();
      return object ? message_value(m) : std::nullopt;
    });
    if (!v) return object && bytes.front() == '{' ? BodyError::kNotJson : BodyError::kNoPrompt;
    list.push_back(std::move(*v));
  }
  out.chat = true;
  out.messages = Value(std::move(list));
  if (!o.tools.empty()) {
    auto tools = piece(o.tools, [](json& t) -> std::optional<Value> {
      return t.is_array() && !t.empty() ? to_value(t, 1) : std::nullopt;
    });
    if (tools) {
      out.tools = std::move(*tools);
      out.has_tools = true;
    }
  }
  return BodyError::kNone;
}

BodyError parse_completion(const json& doc, InferenceBody& out) {
  auto found = doc.find("prompt");
  if (found == doc.end()) return BodyError::kNoPrompt;
  const json& prompt = *found;
  const json* one = &prompt;
  // A batch of one prompt is that prompt; a longer batch is picked by its first.
  if (prompt.is_array() && !prompt.empty() && (prompt[0].is_string() || prompt[0].is_array()))
    one = &prompt[0];
  if (one->is_string()) {
    out.prompt = one->get<std::string>();
    return out.prompt.empty() ? BodyError::kNoPrompt : BodyError::kNone;
  }
  if (!one->is_array() || one->empty()) return BodyError::kNoPrompt;
  out.prompt_ids.reserve(one->size());
  for (const json& id : *one) {
    if (!id.is_number_unsigned() ||
        id.get<std::uint64_t>() > std::numeric_limits<std::uint32_t>::max())
      return BodyError::kNoPrompt;
    out.prompt_ids.push_back(static_cast<std::uint32_t>(id.get<std::uint64_t>()));
  }
  out.prompt_is_ids = true;
  return BodyError::kNone;
}

}  // namespace

BodyError parse_body(std::string_view path, std::string_view body, InferenceBody& out) {
  out = InferenceBody();
  const std::string_view route = path.substr(0, path.find('?'));
  const bool completion_route =
      route.ends_with("/completions") && !route.ends_with("/chat/completions");
  if (!completion_route) {
    thread_local JsonOutline outline;
    if (outline_json(body, outline, kMaxDepth) && outline.has_messages && !outline.model.empty())
      return parse_chat_outline(outline, out);
  }
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return BodyError::kNotJson;
  auto model = doc.find("model");
  if (model == doc.end() || !model->is_string() || model->get_ref<const std::string&>().empty())
    return BodyError::kNoModel;
  out.model = model->get_ref<const std::string&>();
  const bool chat = route.ends_with("/chat/completions") ||
                    (!route.ends_with("/completions") && doc.contains("messages"));
  return chat ? parse_chat(doc, out) : parse_completion(doc, out);
}

std::string_view to_label(BodyError error) {
  switch (error) {
    case BodyError::kNone:
      return "none";
    case BodyError::kNotJson:
      return "not_json";
    case BodyError::kNoModel:
      return "no_model";
    case BodyError::kNoPrompt:
      return "no_prompt";
  }
  return "none";
}

}  // namespace ic::gateway
