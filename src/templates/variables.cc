#include "templates/variables.hh"

#include <xxhash.h>

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

namespace ic::templates {
namespace {

using chat_template::Value;
using json = nlohmann::ordered_json;

// Nesting a json variable may have: the conversion recurses once per level.
constexpr int kMaxJsonDepth = 64;
// json values of at least this many bytes are kept per thread, parsed: a
// family's stable tool schemas are parsed once, not on every call.
constexpr std::size_t kCachedJsonBytes = 256;
constexpr std::size_t kJsonCacheSlots = 256;

struct JsonSlot {
  XXH128_hash_t key{0, 0};
  std::size_t bytes = 0;
  bool used = false;
  Value value;
};

bool to_value(const json& j, int depth, Value& out) {
  if (depth > kMaxJsonDepth) return false;
  switch (j.type()) {
    case json::value_t::null:
      out = Value(chat_template::None{});
      return true;
    case json::value_t::boolean:
      out = Value(j.get<bool>());
      return true;
    case json::value_t::number_integer:
      out = Value(j.get<std::int64_t>());
      return true;
    case json::value_t::number_unsigned: {
      const auto u = j.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(INT64_MAX)) {
        out = Value(static_cast<double>(u));
      } else {
        out = Value(static_cast<std::int64_t>(u));
      }
      return true;
    }
    case json::value_t::number_float:
      out = Value(j.get<double>());
      return true;
    case json::value_t::string:
      out = Value(j.get<std::string>());
      return true;
    case json::value_t::array: {
      chat_template::List list;
      list.reserve(j.size());
      for (const json& e : j) {
        Value v;
        if (!to_value(e, depth + 1, v)) return false;
        list.push_back(std::move(v));
      }
      out = Value(std::move(list));
      return true;
    }
    case json::value_t::object: {
      chat_template::Dict dict;
      dict.reserve(j.size());
      for (const auto& [k, e] : j.items()) {
        Value v;
        if (!to_value(e, depth + 1, v)) return false;
        dict.emplace_back(k, std::move(v));
      }
      out = Value(std::move(dict));
      return true;
    }
    default:
      return false;  // binary, discarded
  }
}

// A JSON text as a template value. Template values of lists and dicts are
// never changed by a render (only namespaces are), so one parsed value may
// serve every render of the thread.
bool json_value(std::string_view text, Value& out) {
  JsonSlot* slot = nullptr;
  XXH128_hash_t key{0, 0};
  if (text.size() >= kCachedJsonBytes) {
    thread_local std::vector<JsonSlot> cache(kJsonCacheSlots);
    key = XXH3_128bits(text.data(), text.size());
    slot = &cache[key.low64 % kJsonCacheSlots];
    if (slot->used && slot->bytes == text.size() && XXH128_isEqual(slot->key, key)) {
      out = slot->value;
      return true;
    }
  }
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !to_value(j, 0, out)) return false;
  if (slot != nullptr) {
    slot->key = key;
    slot->bytes = text.size();
    slot->used = true;
    slot->value = out;
  }
  return true;
}

// The value of `text` as `type`; false when it is not one.
bool typed(VariableType type, std::string_view text, Value& out) {
  const char* end = text.data() + text.size();
  switch (type) {
    case VariableType::kString:
      out = Value(std::string(text));
      return true;
    case VariableType::kInteger: {
      std::int64_t i = 0;
      const auto r = std::from_chars(text.data(), end, i);
      if (text.empty() || r.ec != std::errc() || r.ptr != end) return false;
      out = Value(i);
      return true;
    }
    case VariableType::kNumber: {
      double d = 0;
      const auto r = std::from_chars(text.data(), end, d, std::chars_format::general);
      if (text.empty() || r.ec != std::errc() || r.ptr != end || !std::isfinite(d)) return false;
      out = Value(d);
      return true;
    }
    case VariableType::kBoolean:
      if (text != "true" && text != "false") return false;
      out = Value(text == "true");
      return true;
    case VariableType::kJson:
      return json_value(text, out);
  }
  return false;
}

std::string_view type_name(VariableType type) {
  switch (type) {
    case VariableType::kString:
      return "a string";
    case VariableType::kInteger:
      return "an integer";
    case VariableType::kNumber:
      return "a number";
    case VariableType::kBoolean:
      return "a boolean (true or false)";
    case VariableType::kJson:
      return "a JSON value";
  }
  return "?";
}

}  // namespace

bool typed_variables(const PromptTemplate& t, std::span<const VariableView> given,
                     chat_template::Dict& out, std::string& error) {
  out.clear();
  for (const auto& [name, _] : given) {
    if (t.variable(name) == nullptr) {
      error = "undeclared variable \"" + std::string(name) + "\"";
      return false;
    }
  }
  for (const Variable& v : t.variables) {
    const VariableView* found = nullptr;
    for (const VariableView& g : given) {
      if (g.first != v.name) continue;
      if (found != nullptr) {
        error = "variable \"" + v.name + "\" given twice";
        return false;
      }
      found = &g;
    }
    if (found == nullptr) {
      error = "missing variable \"" + v.name + "\"";
      return false;
    }
    Value value;
    if (!typed(v.type, found->second, value)) {
      error = "variable \"" + v.name + "\": not " + std::string(type_name(v.type));
      return false;
    }
    out.emplace_back(v.name, std::move(value));
  }
  return true;
}

}  // namespace ic::templates
