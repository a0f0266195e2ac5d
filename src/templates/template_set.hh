#pragma once
// Prompt templates per tenant (docs/templates.md): the one JSON document that
// replaces the whole template state (from POST /templates, --templates-file,
// the replication stream or the state file), parsed into the immutable
// TemplateSet every core renders from.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "chat_template/template.hh"
#include "config/policy.hh"

namespace ic::templates {

// A variable's declared type: how its string value (the request's
// map<string,string>) becomes a template value (docs/templates.md "Variables").
enum class VariableType : std::uint8_t {
  kString,   // as given
  kInteger,  // a decimal int64 ("-12"), nothing else
  kNumber,   // a finite decimal or exponent number ("0.5", "1e3")
  kBoolean,  // "true" or "false"
  kJson,     // one JSON value (objects keep their key order)
};

// Stable: the same for every call of a family of prompts (the system prompt,
// tool schemas); volatile: changes per call (a date, a request id, the user's
// question). The stable prefix ends where the first volatile one is read.
enum class Stability : std::uint8_t { kStable, kVolatile };

struct Variable {
  std::string name;
  VariableType type = VariableType::kString;
  Stability stability = Stability::kStable;
};

// One template as declared, compiled, with its revision.
struct PromptTemplate {
  std::string tenant_id;
  std::string name;
  // The model whose tokenizer (--tokenizer-models-dir) and KV block size
  // (tokens, > 0) the stable prefix is computed with.
  std::string model_id;
  std::int32_t block_size = 0;
  std::vector<Variable> variables;  // declaration order
  std::string source;               // Jinja text (the chat_template subset)
  // 16 lowercase hex digits: XXH3-64 of the canonical form of model_id,
  // block_size, variables and source. Equal revisions = equal content.
  std::string revision;
  std::shared_ptr<const chat_template::Template> compiled;
  // Names a render watches (the volatile variables and strftime_now, which
  // reads the clock): chat_template::RenderProbe::watched.
  std::vector<std::string> volatile_names;

  const Variable* variable(std::string_view name) const;
};

// The immutable template state: share as std::shared_ptr<const TemplateSet>
// and swap the pointer to change it.
class TemplateSet {
 public:
  TemplateSet() = default;
  TemplateSet(std::vector<PromptTemplate> templates, std::string source_json);

  // The template `name` of `tenant`, or nullptr. No allocation.
  const PromptTemplate* find(std::string_view tenant, std::string_view name) const;
  std::size_t size() const noexcept { return templates_.size(); }
  const std::vector<PromptTemplate>& templates() const noexcept { return templates_; }
  // The document this set was parsed from ("" for the empty set): what the
  // state file saves and the stream carries.
  const std::string& source_json() const noexcept { return source_json_; }

  // The shared empty set.
  static std::shared_ptr<const TemplateSet> empty();

 private:
  std::vector<PromptTemplate> templates_;
  // "<tenant>\n<name>" → index into templates_.
  std::unordered_map<std::string, std::size_t, config::StringHash, std::equal_to<>> by_key_;
  std::string source_json_;
};

// Outcome of parsing a template document: exactly one of `set` / `error`.
struct TemplateParseResult {
  std::shared_ptr<const TemplateSet> set;
  // Why not, for a 400 ("templates[1]: unknown field \"foo\"",
  // "templates[0] (team-a/agent): line 3: unknown filter \"x\"").
  std::string error;
  bool ok() const noexcept { return set != nullptr; }
};

// Largest template document (bytes), as for the policy document.
inline constexpr std::size_t kMaxDocumentBytes = 1 << 20;

// Parses {"version":1,"templates":[{tenantID, name, model, blockSize?,
// variables:[{name, type?, stability}], source}]} (docs/templates.md
// "The document"). Errors: not JSON, trailing data, over kMaxDocumentBytes,
// another version, an unknown field, a wrong type, an empty tenantID / name /
// model, a name with '@', blockSize outside 1..65536, a variable name that is
// not an identifier or declared twice, an unknown type or stability, a
// (tenantID, name) given twice, a source outside the Jinja subset.
// `default_block_size` (--engine-block-size) applies without blockSize.
TemplateParseResult parse_templates_json(std::string_view body, std::int32_t default_block_size);

}  // namespace ic::templates
