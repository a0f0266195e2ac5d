#include "templates/template_set.hh"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <unordered_set>
#include <utility>

namespace ic::templates {
namespace {

using json = nlohmann::json;

// A document error carrying the 400 reason.
struct DocumentError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr std::int64_t kVersion = 1;
constexpr std::int64_t kMaxBlockSize = 65536;

std::string key(std::string_view tenant, std::string_view name) {
  std::string k;
  k.reserve(tenant.size() + 1 + name.size());
  k.append(tenant).append(1, '\n').append(name);
  return k;
}

void require_object(const json& j, const std::string& where) {
  if (!j.is_object()) throw DocumentError(where + ": expected an object");
}

void check_fields(const json& j, std::initializer_list<std::string_view> allowed,
                  const std::string& where) {
  for (const auto& [name, _] : j.items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || a == name;
    if (!known) throw DocumentError("unknown field \"" + name + "\" in " + where);
  }
}

const json& required(const json& j, const char* field, const std::string& where) {
  const auto it = j.find(field);
  if (it == j.end()) throw DocumentError(where + ": missing \"" + field + "\"");
  return *it;
}

std::string get_string(const json& v, const std::string& where, bool non_empty) {
  if (!v.is_string()) throw DocumentError(where + ": expected a string");
  std::string s = v.get<std::string>();
  if (non_empty && s.empty()) throw DocumentError(where + ": empty");
  return s;
}

bool is_identifier(std::string_view s) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

VariableType parse_type(const std::string& s, const std::string& where) {
  if (s == "string") return VariableType::kString;
  if (s == "integer") return VariableType::kInteger;
  if (s == "number") return VariableType::kNumber;
  if (s == "boolean") return VariableType::kBoolean;
  if (s == "json") return VariableType::kJson;
  throw DocumentError(where + ": unknown type \"" + s +
                      "\" (string, integer, number, boolean, json)");
}

Stability parse_stability(const std::string& s, const std::string& where) {
  if (s == "stable") return Stability::kStable;
  if (s == "volatile") return Stability::kVolatile;
  throw DocumentError(where + ": unknown stability \"" + s + "\" (stable, volatile)");
}

std::vector<Variable> parse_variables(const json& j, const std::string& where) {
  if (!j.is_array()) throw DocumentError(where + ": expected an array");
  std::vector<Variable> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    require_object(j[i], at);
    check_fields(j[i], {"name", "type", "stability"}, at);
    Variable v;
    v.name = get_string(required(j[i], "name", at), at + ".name", true);
    if (!is_identifier(v.name)) throw DocumentError(at + ".name: not an identifier");
    for (const Variable& earlier : out) {
      if (earlier.name == v.name) throw DocumentError(at + ": \"" + v.name + "\" declared twice");
    }
    if (auto it = j[i].find("type"); it != j[i].end()) {
      v.type = parse_type(get_string(*it, at + ".type", true), at + ".type");
    }
    v.stability = parse_stability(
        get_string(required(j[i], "stability", at), at + ".stability", true), at + ".stability");
    out.push_back(std::move(v));
  }
  return out;
}

// XXH3-64 over a canonical JSON of everything a render depends on, as 16 hex digits.
std::string revision_of(const PromptTemplate& t) {
  json vars = json::array();
  for (const Variable& v : t.variables) {
    vars.push_back({v.name, static_cast<int>(v.type), static_cast<int>(v.stability)});
  }
  const std::string canonical = json{
      {"model", t.model_id},
      {"blockSize", t.block_size},
      {"variables", vars},
      {"source", t.source}}.dump();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(canonical.data(), canonical.size())));
  return hex;
}

PromptTemplate parse_template(const json& j, std::int32_t default_block_size,
                              const std::string& where) {
  require_object(j, where);
  check_fields(j, {"tenantID", "name", "model", "blockSize", "variables", "source"}, where);
  PromptTemplate t;
  t.tenant_id = get_string(required(j, "tenantID", where), where + ".tenantID", true);
  t.name = get_string(required(j, "name", where), where + ".name", true);
  if (t.name.find('@') != std::string::npos) {
    throw DocumentError(where + ".name: '@' separates a name from a revision");
  }
  t.model_id = get_string(required(j, "model", where), where + ".model", true);
  t.block_size = default_block_size;
  if (auto it = j.find("blockSize"); it != j.end()) {
    if (!it->is_number_integer() || it->get<std::int64_t>() < 1 ||
        it->get<std::int64_t>() > kMaxBlockSize) {
      throw DocumentError(where + ".blockSize: expected an integer in 1..65536");
    }
    t.block_size = static_cast<std::int32_t>(it->get<std::int64_t>());
  }
  if (auto it = j.find("variables"); it != j.end()) {
    t.variables = parse_variables(*it, where + ".variables");
  }
  t.source = get_string(required(j, "source", where), where + ".source", false);
  std::string error;
  auto compiled = chat_template::Template::parse(t.source, error);
  if (compiled == nullptr) {
    throw DocumentError(where + " (" + t.tenant_id + "/" + t.name + "): " + error);
  }
  t.compiled = std::move(compiled);
  for (const Variable& v : t.variables) {
    if (v.stability == Stability::kVolatile) t.volatile_names.push_back(v.name);
  }
  t.volatile_names.emplace_back("strftime_now");
  t.revision = revision_of(t);
  return t;
}

}  // namespace

const Variable* PromptTemplate::variable(std::string_view name) const {
  for (const Variable& v : variables) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

TemplateSet::TemplateSet(std::vector<PromptTemplate> templates, std::string source_json)
    : templates_(std::move(templates)), source_json_(std::move(source_json)) {
  for (std::size_t i = 0; i < templates_.size(); ++i) {
    by_key_.emplace(key(templates_[i].tenant_id, templates_[i].name), i);
  }
}

const PromptTemplate* TemplateSet::find(std::string_view tenant, std::string_view name) const {
  // One probe without building the key: tenants and names are short, so a
  // stack buffer holds the usual key.
  char buffer[256];
  const std::size_t size = tenant.size() + 1 + name.size();
  std::string heap;
  std::string_view k;
  if (size <= sizeof buffer) {
    std::copy(tenant.begin(), tenant.end(), buffer);
    buffer[tenant.size()] = '\n';
    std::copy(name.begin(), name.end(), buffer + tenant.size() + 1);
    k = std::string_view(buffer, size);
  } else {
    heap = key(tenant, name);
    k = heap;
  }
  const auto it = by_key_.find(k);
  return it == by_key_.end() ? nullptr : &templates_[it->second];
}

std::shared_ptr<const TemplateSet> TemplateSet::empty() {
  static const std::shared_ptr<const TemplateSet> set = std::make_shared<const TemplateSet>();
  return set;
}

TemplateParseResult parse_templates_json(std::string_view body, std::int32_t default_block_size) {
  TemplateParseResult result;
  if (body.size() > kMaxDocumentBytes) {
    result.error = "document over " + std::to_string(kMaxDocumentBytes) + " bytes";
    return result;
  }
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    result.error = "not a JSON document (or trailing data)";
    return result;
  }
  try {
    require_object(doc, "document");
    check_fields(doc, {"version", "templates"}, "document");
    const json& version = required(doc, "version", "document");
    if (!version.is_number_integer() || version.get<std::int64_t>() != kVersion) {
      throw DocumentError("unsupported version " + version.dump() + " (want 1)");
    }
    std::vector<PromptTemplate> templates;
    std::unordered_set<std::string> keys;
    if (auto it = doc.find("templates"); it != doc.end()) {
      if (!it->is_array()) throw DocumentError("templates: expected an array");
      for (std::size_t i = 0; i < it->size(); ++i) {
        PromptTemplate t =
            parse_template((*it)[i], default_block_size, "templates[" + std::to_string(i) + "]");
        if (!keys.insert(key(t.tenant_id, t.name)).second) {
          throw DocumentError("templates[" + std::to_string(i) + "]: " + t.tenant_id + "/" +
                              t.name + " given twice");
        }
        templates.push_back(std::move(t));
      }
    }
    result.set = std::make_shared<const TemplateSet>(std::move(templates), std::string(body));
  } catch (const DocumentError& e) {
    result.error = e.what();
  } catch (const json::exception& e) {  // a number out of range for get<>
    result.error = e.what();
  }
  return result;
}

}  // namespace ic::templates
