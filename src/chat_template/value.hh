#pragma once
// Values of the Jinja subset (docs/prompt-text.md "Chat template"), with
// Python's semantics where templates depend on them (truthiness, str(),
// equality, repr of lists and dicts), as transformers renders chat templates
// with Python Jinja2.

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ic::chat_template {

// A render-time error (type error, raise_exception(), a limit); the message
// says what went wrong.
class RenderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Value;
using List = std::vector<Value>;
// Insertion-ordered, as Python dicts are; linear lookup (templates' dicts are small).
using Dict = std::vector<std::pair<std::string, Value>>;
// A callable: positional args, keyword args.
using Function =
    std::function<Value(std::vector<Value>&, std::vector<std::pair<std::string, Value>>&)>;

struct Undefined {};
struct None {};
// namespace(): a dict whose attributes `set ns.x = …` may assign.
struct Namespace {
  Dict attrs;
};

class Value {
 public:
  using Storage =
      std::variant<Undefined, None, bool, std::int64_t, double, std::shared_ptr<const std::string>,
                   std::shared_ptr<List>, std::shared_ptr<Dict>, std::shared_ptr<Namespace>,
                   std::shared_ptr<const Function>>;
  Value() = default;
  Value(None) : v_(None{}) {}
  Value(bool b) : v_(b) {}
  Value(std::int64_t i) : v_(i) {}
  Value(int i) : v_(static_cast<std::int64_t>(i)) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::make_shared<const std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(List l) : v_(std::make_shared<List>(std::move(l))) {}
  Value(Dict d) : v_(std::make_shared<Dict>(std::move(d))) {}
  Value(std::shared_ptr<Namespace> ns) : v_(std::move(ns)) {}
  Value(Function f) : v_(std::make_shared<const Function>(std::move(f))) {}

  bool is_undefined() const { return std::holds_alternative<Undefined>(v_); }
  bool is_none() const { return std::holds_alternative<None>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_int() const { return std::holds_alternative<std::int64_t>(v_); }
  bool is_float() const { return std::holds_alternative<double>(v_); }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return std::holds_alternative<std::shared_ptr<const std::string>>(v_); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<List>>(v_); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<Dict>>(v_); }
  bool is_namespace() const { return std::holds_alternative<std::shared_ptr<Namespace>>(v_); }
  bool is_callable() const { return std::holds_alternative<std::shared_ptr<const Function>>(v_); }

  bool as_bool() const { return std::get<bool>(v_); }
  // Integer value of an int or bool (Python: bool is an int).
  std::int64_t as_int() const {
    return is_bool() ? (as_bool() ? 1 : 0) : std::get<std::int64_t>(v_);
  }
  // Numeric value of an int, float or bool.
  double as_number() const {
    return is_float() ? std::get<double>(v_) : static_cast<double>(as_int());
  }
  const std::string& as_string() const { return *std::get<std::shared_ptr<const std::string>>(v_); }
  const List& as_list() const { return *std::get<std::shared_ptr<List>>(v_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<Dict>>(v_); }
  Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(v_); }
  const Function& as_function() const { return *std::get<std::shared_ptr<const Function>>(v_); }

  // Python truthiness (undefined, none, false, 0, "", [], {} are false).
  bool truthy() const;
  // Python str(): None → "None", True → "True", 1.0 → "1.0", undefined → "",
  // lists and dicts as their repr.
  std::string str() const;
  // Python repr(): strings quoted ('…'), the rest as str().
  std::string repr() const;
  // The type name used in error messages ("string", "list", …).
  std::string_view type_name() const;
  // Member lookup for `.name` / `["name"]` on dicts and namespaces;
  // undefined when missing.
  Value member(std::string_view name) const;

 private:
  Storage v_;
};

// Python ==, including 1 == 1.0 == True and element-wise lists and dicts.
bool equal(const Value& a, const Value& b);
// Python <: numbers, strings (code point order), lists; else RenderError.
bool less(const Value& a, const Value& b);
// json.dumps(v, ensure_ascii=False) with `indent` (< 0: none, Python's
// default ", " and ": " separators), as transformers' tojson filter.
std::string to_json(const Value& v, int indent = -1);
// Finds `key` in a dict, or nullptr.
const Value* find(const Dict& dict, std::string_view key);

}  // namespace ic::chat_template
