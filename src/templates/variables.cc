#include "templates/variables.hh"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

namespace ic::templates {
namespace {

using chat_template::Value;
using json = nlohmann::ordered_json;

// Nesting a json variable may have: the conversion recurses once per level.
constexpr int kMaxJsonDepth = 64;

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
    case VariableType::kJson: {
      const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
      return !j.is_discarded() && to_value(j, 0, out);
    }
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
