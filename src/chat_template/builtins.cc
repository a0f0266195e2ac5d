#include "chat_template/builtins.hh"

#include <algorithm>
#include <array>
#include <ctime>

#include "chat_template/template.hh"
#include "tokenizer/utf8.hh"

namespace ic::chat_template {
namespace {

// range() longer than this is a render error (a loop bound, not a use case).
constexpr std::int64_t kMaxRange = 100'000;

// Python's str.isspace() code points.
bool py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

const std::string& need_string(const Value& v, std::string_view what) {
  if (!v.is_string())
    throw RenderError(std::string(what) + " needs a string, got " + std::string(v.type_name()));
  return v.as_string();
}

const Value* kwarg(Kwargs& kw, std::string_view key) {
  for (auto& [k, v] : kw) {
    if (k == key) return &v;
  }
  return nullptr;
}

// Positional i, else keyword `key`, else nullptr.
const Value* arg(Args& args, Kwargs& kw, std::size_t i, std::string_view key) {
  return i < args.size() ? &args[i] : kwarg(kw, key);
}

// str.strip / lstrip / rstrip: `chars` none → white space.
std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
  const auto cps = code_points(s);
  std::vector<char32_t> set;
  const bool ws = chars == nullptr || chars->is_none();
  if (!ws) set = code_points(need_string(*chars, "strip()"));
  auto drop = [&](char32_t c) {
    return ws ? py_space(c) : std::find(set.begin(), set.end(), c) != set.end();
  };
  std::size_t b = 0, e = cps.size();
  if (left)
    while (b < e && drop(cps[b])) ++b;
  if (right)
    while (e > b && drop(cps[e - 1])) --e;
  return from_code_points(cps, b, e);
}

Value split(const std::string& s, const Value* sep, const Value* maxsplit_v) {
  std::int64_t maxsplit =
      maxsplit_v != nullptr && !maxsplit_v->is_none() ? maxsplit_v->as_int() : -1;
  List out;
  if (sep == nullptr || sep->is_none()) {  // runs of white space, no empty parts
    const auto cps = code_points(s);
    std::size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && py_space(cps[i])) ++i;
      if (i == cps.size()) break;
      std::size_t j = i;
      if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
        std::size_t e = cps.size();
        while (e > i && py_space(cps[e - 1])) --e;
        out.emplace_back(from_code_points(cps, i, e));
        break;
      }
      while (j < cps.size() && !py_space(cps[j])) ++j;
      out.emplace_back(from_code_points(cps, i, j));
      i = j;
    }
    return Value(std::move(out));
  }
  const std::string& d = need_string(*sep, "split()");
  if (d.empty()) throw RenderError("split(): empty separator");
  std::size_t pos = 0;
  for (;;) {
    const std::size_t at = s.find(d, pos);
    if (at == std::string::npos ||
        (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit)) {
      out.emplace_back(s.substr(pos));
      return Value(std::move(out));
    }
    out.emplace_back(s.substr(pos, at - pos));
    pos = at + d.size();
  }
}

std::string ascii_map(const std::string& s, int mode) {  // 0 lower, 1 upper, 2 title, 3 capitalize
  std::string out = s;
  bool start = true;
  for (std::size_t i = 0; i < out.size(); ++i) {
    char& c = out[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    bool upper = mode == 1 || ((mode == 2 || mode == 3) && start);
    if (mode == 3 && i > 0) upper = false;
    if (alpha) c = upper ? static_cast<char>(std::toupper(c)) : static_cast<char>(std::tolower(c));
    start = mode == 2 ? !alpha : false;
  }
  return out;
}

std::string replace(const std::string& s, const std::string& from, const std::string& to,
                    std::int64_t count) {
  std::string out;
  std::size_t pos = 0;
  for (std::int64_t n = 0; count < 0 || n < count; ++n) {
    const std::size_t at =
        from.empty() ? (pos <= s.size() ? pos : std::string::npos) : s.find(from, pos);
    if (at == std::string::npos) break;
    // Intermediate strings are bounded like the output: a replacement as long
    // as the text, at every position, would otherwise be quadratic in memory.
    if (out.size() + (at - pos) + to.size() > kMaxOutputBytes)
      throw RenderError("replace(): result over " + std::to_string(kMaxOutputBytes) + " bytes");
    out.append(s, pos, at - pos);
    out += to;
    if (from.empty()) {
      if (at >= s.size()) {
        pos = s.size() + 1;
        break;
      }
      std::size_t next = at + 1;
      while (next < s.size() && (static_cast<unsigned char>(s[next]) & 0xC0) == 0x80) ++next;
      out.append(s, at, next - at);
      pos = next;
    } else {
      pos = at + from.size();
    }
  }
  if (pos <= s.size()) out.append(s, pos);
  return out;
}

List as_items(const Value& v) {
  if (v.is_list()) return v.as_list();
  if (v.is_string()) {
    List out;
    const auto cps = code_points(v.as_string());
    for (std::size_t i = 0; i < cps.size(); ++i) out.emplace_back(from_code_points(cps, i, i + 1));
    return out;
  }
  if (v.is_dict()) {
    List out;
    for (const auto& [k, _] : v.as_dict()) out.emplace_back(k);
    return out;
  }
  if (v.is_undefined()) return {};
  throw RenderError("a " + std::string(v.type_name()) + " is not iterable");
}

std::int64_t length(const Value& v) {
  if (v.is_string()) return static_cast<std::int64_t>(code_points(v.as_string()).size());
  if (v.is_list()) return static_cast<std::int64_t>(v.as_list().size());
  if (v.is_dict()) return static_cast<std::int64_t>(v.as_dict().size());
  if (v.is_undefined()) return 0;
  throw RenderError("a " + std::string(v.type_name()) + " has no length");
}

}  // namespace

std::vector<char32_t> code_points(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) out.push_back(tokenizer::next_code_point(s, i));
  return out;
}

std::string from_code_points(const std::vector<char32_t>& cps, std::size_t begin, std::size_t end) {
  std::string out;
  for (std::size_t i = begin; i < end && i < cps.size(); ++i) tokenizer::append_utf8(out, cps[i]);
  return out;
}

bool is_known_filter(std::string_view name) {
  static constexpr std::array<std::string_view, 27> kFilters = {
      "length", "count",      "trim",       "upper",   "lower",   "capitalize", "title",
      "tojson", "string",     "int",        "float",   "list",    "join",       "first",
      "last",   "default",    "d",          "reverse", "replace", "abs",        "safe",
      "items",  "selectattr", "rejectattr", "map",     "unique",  "wordcount"};
  return std::find(kFilters.begin(), kFilters.end(), name) != kFilters.end();
}

bool is_known_test(std::string_view name) {
  static constexpr std::array<std::string_view, 26> kTests = {
      "defined", "undefined", "none",        "string",  "number",   "integer",  "float",
      "boolean", "true",      "false",       "mapping", "iterable", "sequence", "callable",
      "even",    "odd",       "divisibleby", "eq",      "equalto",  "ne",       "lt",
      "gt",      "le",        "ge",          "in",      "sameas"};
  return std::find(kTests.begin(), kTests.end(), name) != kTests.end();
}

bool apply_test(std::string_view name, const Value& v, const Args& args) {
  auto other = [&]() -> const Value& {
    if (args.empty()) throw RenderError("test '" + std::string(name) + "' needs an argument");
    return args[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_int() || v.is_float();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "callable") return v.is_callable();
  if (name == "even" || name == "odd") {
    if (!v.is_int()) throw RenderError("test '" + std::string(name) + "' needs an integer");
    return (v.as_int() % 2 == 0) == (name == "even");
  }
  if (name == "divisibleby") return other().as_int() != 0 && v.as_int() % other().as_int() == 0;
  if (name == "eq" || name == "equalto" || name == "sameas") return equal(v, other());
  if (name == "ne") return !equal(v, other());
  if (name == "lt") return less(v, other());
  if (name == "gt") return less(other(), v);
  if (name == "le") return !less(other(), v);
  if (name == "ge") return !less(v, other());
  if (name == "in") return contains(other(), v);
  throw RenderError("unsupported test '" + std::string(name) + "'");
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string())
    return container.as_string().find(need_string(item, "'in' on a string")) != std::string::npos;
  if (container.is_list()) {
    return std::any_of(container.as_list().begin(), container.as_list().end(),
                       [&](const Value& x) { return equal(x, item); });
  }
  if (container.is_dict())
    return item.is_string() && find(container.as_dict(), item.as_string()) != nullptr;
  if (container.is_namespace())
    return item.is_string() && find(container.as_namespace().attrs, item.as_string()) != nullptr;
  if (container.is_undefined()) return false;
  throw RenderError("'in' needs a string, list or dict, got " + std::string(container.type_name()));
}

bool has_method(const Value& object, std::string_view name) {
  static constexpr std::array<std::string_view, 14> kStringMethods = {
      "startswith", "endswith", "split",      "strip",   "lstrip", "rstrip", "upper",
      "lower",      "title",    "capitalize", "replace", "find",   "count",  "join"};
  static constexpr std::array<std::string_view, 4> kDictMethods = {"items", "keys", "values",
                                                                   "get"};
  if (object.is_string())
    return std::find(kStringMethods.begin(), kStringMethods.end(), name) != kStringMethods.end();
  if (object.is_dict())
    return std::find(kDictMethods.begin(), kDictMethods.end(), name) != kDictMethods.end();
  return false;
}

namespace {

Value dict_method(const Dict& d, std::string_view name, Args& args, Kwargs& kw) {
  List out;
  if (name == "items") {
    for (const auto& [k, v] : d) out.emplace_back(List{Value(k), v});
  } else if (name == "keys") {
    for (const auto& [k, _] : d) out.emplace_back(k);
  } else if (name == "values") {
    for (const auto& [_, v] : d) out.push_back(v);
  } else {  // get
    const Value* key = arg(args, kw, 0, "key");
    if (key == nullptr) throw RenderError("get() needs a key");
    const Value* hit = key->is_string() ? find(d, key->as_string()) : nullptr;
    if (hit != nullptr) return *hit;
    const Value* def = arg(args, kw, 1, "default");
    return def != nullptr ? *def : Value(None{});
  }
  return Value(std::move(out));
}

bool affix(const std::string& s, const Value& v, bool prefix) {
  auto one = [&](const std::string& a) {
    return prefix ? std::string_view(s).starts_with(a) : std::string_view(s).ends_with(a);
  };
  if (v.is_list()) {
    return std::any_of(v.as_list().begin(), v.as_list().end(),
                       [&](const Value& x) { return one(need_string(x, "startswith()")); });
  }
  return one(need_string(v, prefix ? "startswith()" : "endswith()"));
}

std::int64_t count_of(const std::string& s, const std::string& sub) {
  if (sub.empty()) return static_cast<std::int64_t>(code_points(s).size()) + 1;
  std::int64_t n = 0;
  for (std::size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size()))
    ++n;
  return n;
}

}  // namespace

Value call_method(const Value& object, std::string_view name, Args& args, Kwargs& kw) {
  if (object.is_dict() && has_method(object, name))
    return dict_method(object.as_dict(), name, args, kw);
  if (!object.is_string() || !has_method(object, name))
    throw RenderError("a " + std::string(object.type_name()) + " has no method '" +
                      std::string(name) + "'");
  const std::string& s = object.as_string();
  const Value* a0 = arg(args, kw, 0, name == "split" ? "sep" : "chars");
  if (name == "startswith" || name == "endswith") {
    if (args.empty()) throw RenderError(std::string(name) + "() needs an argument");
    return Value(affix(s, args[0], name == "startswith"));
  }
  if (name == "split") return split(s, a0, arg(args, kw, 1, "maxsplit"));
  if (name == "strip") return Value(strip(s, a0, true, true));
  if (name == "lstrip") return Value(strip(s, a0, true, false));
  if (name == "rstrip") return Value(strip(s, a0, false, true));
  if (name == "lower") return Value(ascii_map(s, 0));
  if (name == "upper") return Value(ascii_map(s, 1));
  if (name == "title") return Value(ascii_map(s, 2));
  if (name == "capitalize") return Value(ascii_map(s, 3));
  if (args.empty()) throw RenderError(std::string(name) + "() needs an argument");
  if (name == "replace") {
    const Value* n = arg(args, kw, 2, "count");
    return Value(replace(s, need_string(args[0], "replace()"),
                         need_string(args.size() > 1 ? args[1] : Value(), "replace()"),
                         n != nullptr ? n->as_int() : -1));
  }
  if (name == "find") {
    const std::size_t at = s.find(need_string(args[0], "find()"));
    return Value(at == std::string::npos
                     ? std::int64_t{-1}
                     : static_cast<std::int64_t>(code_points(s.substr(0, at)).size()));
  }
  if (name == "count") return Value(count_of(s, need_string(args[0], "count()")));
  // join
  std::string out;
  const List items = as_items(args[0]);
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += s;
    out += need_string(items[i], "join()");
  }
  return Value(std::move(out));
}

Dict make_globals() {
  Dict g;
  g.emplace_back(
      "raise_exception", Value(Function([](Args& args, Kwargs&) -> Value {
        throw RenderError(args.empty() ? std::string("raise_exception()") : args[0].str());
      })));
  g.emplace_back("namespace", Value(Function([](Args& args, Kwargs& kw) -> Value {
                   auto ns = std::make_shared<Namespace>();
                   if (!args.empty() && args[0].is_dict()) ns->attrs = args[0].as_dict();
                   for (auto& [k, v] : kw) ns->attrs.emplace_back(k, v);
                   return Value(std::move(ns));
                 })));
  g.emplace_back("dict",
                 Value(Function([](Args&, Kwargs& kw) -> Value { return Value(Dict(kw)); })));
  g.emplace_back("range", Value(Function([](Args& args, Kwargs&) -> Value {
                   if (args.empty() || args.size() > 3)
                     throw RenderError("range() takes 1 to 3 arguments");
                   const std::int64_t start = args.size() > 1 ? args[0].as_int() : 0;
                   const std::int64_t stop = args.size() > 1 ? args[1].as_int() : args[0].as_int();
                   const std::int64_t step = args.size() > 2 ? args[2].as_int() : 1;
                   if (step == 0) throw RenderError("range() step must not be zero");
                   List out;
                   for (std::int64_t i = start; step > 0 ? i < stop : i > stop;) {
                     if (static_cast<std::int64_t>(out.size()) >= kMaxRange)
                       throw RenderError("range() too long");
                     out.emplace_back(i);
                     if (__builtin_add_overflow(i, step, &i)) break;  // past stop either way
                   }
                   return Value(std::move(out));
                 })));
  g.emplace_back("strftime_now", Value(Function([](Args& args, Kwargs&) -> Value {
                   const std::time_t now = std::time(nullptr);
                   std::tm tm{};
                   gmtime_r(&now, &tm);
                   char buf[256];
                   const std::size_t n = std::strftime(
                       buf, sizeof buf,
                       args.empty() ? "%Y-%m-%d" : need_string(args[0], "strftime_now()").c_str(),
                       &tm);
                   return Value(std::string(buf, n));
                 })));
  return g;
}

namespace {

// selectattr / rejectattr (attribute[, test[, arg]]) and map(attribute=).
Value select_attr(const Value& v, Args& args, bool keep) {
  if (args.empty()) throw RenderError("selectattr() needs an attribute name");
  const std::string& attr = need_string(args[0], "selectattr()");
  const std::string test = args.size() > 1 ? need_string(args[1], "selectattr()") : "";
  if (!test.empty() && !is_known_test(test)) throw RenderError("unsupported test '" + test + "'");
  const Args targs(
      args.begin() + std::min<std::ptrdiff_t>(2, static_cast<std::ptrdiff_t>(args.size())),
      args.end());
  List out;
  for (const Value& item : as_items(v)) {
    const Value field = item.member(attr);
    const bool pass = test.empty() ? field.truthy() : apply_test(test, field, targs);
    if (pass == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

Value map_filter(const Value& v, Args& args, Kwargs& kw) {
  const Value* attr = kwarg(kw, "attribute");
  List out;
  for (const Value& item : as_items(v)) {
    if (attr != nullptr) {
      Value field = item.member(need_string(*attr, "map()"));
      const Value* def = kwarg(kw, "default");
      out.push_back(field.is_undefined() && def != nullptr ? *def : field);
    } else {
      if (args.empty()) throw RenderError("map() needs a filter name or attribute=");
      const std::string name = need_string(args[0], "map()");
      if (!is_known_filter(name) || name == "map")
        throw RenderError("unsupported filter '" + name + "'");
      Args rest(args.begin() + 1, args.end());
      Kwargs none;
      out.push_back(apply_filter(name, item, rest, none));
    }
  }
  return Value(std::move(out));
}

Value string_filter(std::string_view name, const Value& v, Args& args, Kwargs& kw) {
  const std::string& s = need_string(v, name);
  if (name == "trim") return Value(strip(s, arg(args, kw, 0, "chars"), true, true));
  if (name == "upper") return Value(ascii_map(s, 1));
  if (name == "lower") return Value(ascii_map(s, 0));
  if (name == "title") return Value(ascii_map(s, 2));
  if (name == "capitalize") return Value(ascii_map(s, 3));
  if (name == "wordcount")
    return Value(static_cast<std::int64_t>(split(s, nullptr, nullptr).as_list().size()));
  // replace
  if (args.size() < 2) throw RenderError("replace() needs two arguments");
  const Value* n = arg(args, kw, 2, "count");
  return Value(replace(s, need_string(args[0], "replace()"), need_string(args[1], "replace()"),
                       n != nullptr && !n->is_none() ? n->as_int() : -1));
}

}  // namespace

Value apply_filter(std::string_view name, const Value& v, Args& args, Kwargs& kw) {
  if (name == "length" || name == "count") return Value(length(v));
  if (name == "trim" || name == "upper" || name == "lower" || name == "title" ||
      name == "capitalize" || name == "replace" || name == "wordcount")
    return string_filter(name, v, args, kw);
  if (name == "tojson") {
    const Value* indent = arg(args, kw, 0, "indent");
    return Value(to_json(
        v, indent != nullptr && !indent->is_none() ? static_cast<int>(indent->as_int()) : -1));
  }
  if (name == "string") return Value(v.str());
  if (name == "safe") return v;
  if (name == "int") {
    if (v.is_number()) return Value(static_cast<std::int64_t>(v.as_number()));
    if (v.is_string()) {
      try {
        return Value(static_cast<std::int64_t>(std::stoll(v.as_string())));
      } catch (const std::exception&) {
      }
    }
    const Value* def = arg(args, kw, 0, "default");
    return def != nullptr ? *def : Value(0);
  }
  if (name == "float") return Value(v.is_number() ? v.as_number() : 0.0);
  if (name == "abs")
    return v.is_int() ? Value(v.as_int() < 0 ? -v.as_int() : v.as_int())
                      : Value(std::abs(v.as_number()));
  if (name == "default" || name == "d") {
    const Value* def = arg(args, kw, 0, "default_value");
    const Value* boolean = arg(args, kw, 1, "boolean");
    const bool use = v.is_undefined() || (boolean != nullptr && boolean->truthy() && !v.truthy());
    return use ? (def != nullptr ? *def : Value(std::string())) : v;
  }
  if (name == "items") return v.is_undefined() ? Value(List{}) : call_method(v, "items", args, kw);
  if (name == "selectattr" || name == "rejectattr")
    return select_attr(v, args, name == "selectattr");
  if (name == "map") return map_filter(v, args, kw);
  List items = as_items(v);
  if (name == "list") return Value(std::move(items));
  if (name == "first" || name == "last") {
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::string out;
      for (auto it = items.rbegin(); it != items.rend(); ++it) out += it->as_string();
      return Value(std::move(out));
    }
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "unique") {
    List out;
    for (const Value& x : items) {
      if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return equal(x, y); }))
        out.push_back(x);
    }
    return Value(std::move(out));
  }
  // join(d="", attribute=None)
  const Value* sep = arg(args, kw, 0, "d");
  const Value* attr = kwarg(kw, "attribute");
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0 && sep != nullptr) out += need_string(*sep, "join()");
    out += (attr != nullptr ? items[i].member(need_string(*attr, "join()")) : items[i]).str();
  }
  return Value(std::move(out));
}

}  // namespace ic::chat_template
