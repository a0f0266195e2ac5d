#include "chat_template/value.hh"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat_template/template.hh"

namespace ic::chat_template {
namespace {

std::string float_str(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

// The escapes Python's repr() and JSON write alike; nullptr for any other byte.
const char* shared_escape(char c) {
  switch (c) {
    case '\\':
      return "\\\\";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      return nullptr;
  }
}

std::string quote_repr(const std::string& s) {
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (const char* e = shared_escape(c)) {
      out += e;
      continue;
    }
    if (c == q) out += '\\';
    out += c;
  }
  out += q;
  return out;
}

// JSON string escaping as Python's json.dumps writes it (ensure_ascii aside).
// The bytes that need no escape are appended a run at a time: `tojson` of a
// tool schema list is most of a long prompt's render (perf/templates_bench).
void json_string(std::string& out, const std::string& s) {
  out += '"';
  std::size_t run = 0;  // the first byte not yet appended
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s, run, i - run);
    run = i + 1;
    if (const char* e = shared_escape(c)) {
      out += e;
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\b') {
      out += "\\b";
    } else if (c == '\f') {
      out += "\\f";
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    }
  }
  out.append(s, run);
  out += '"';
}

void json_value(std::string& out, const Value& v, int indent, int depth) {
  // A list holding itself twice per level doubles per level: bounded like the
  // output, checked as it is written.
  if (out.size() > kMaxOutputBytes)
    throw RenderError("tojson: result over " + std::to_string(kMaxOutputBytes) + " bytes");
  auto newline = [&](int d) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<std::size_t>(indent * d), ' ');
  };
  const char* item_sep = indent < 0 ? ", " : ",";
  if (v.is_list()) {
    const List& l = v.as_list();
    if (l.empty()) return void(out += "[]");
    out += '[';
    for (std::size_t i = 0; i < l.size(); ++i) {
      if (i > 0) out += item_sep;
      newline(depth + 1);
      json_value(out, l[i], indent, depth + 1);
    }
    newline(depth);
    out += ']';
  } else if (v.is_dict() || v.is_namespace()) {
    const Dict& d = v.is_dict() ? v.as_dict() : v.as_namespace().attrs;
    if (d.empty()) return void(out += "{}");
    out += '{';
    for (std::size_t i = 0; i < d.size(); ++i) {
      if (i > 0) out += item_sep;
      newline(depth + 1);
      json_string(out, d[i].first);
      out += ": ";
      json_value(out, d[i].second, indent, depth + 1);
    }
    newline(depth);
    out += '}';
  } else if (v.is_string()) {
    json_string(out, v.as_string());
  } else if (v.is_none() || v.is_undefined()) {
    out += "null";
  } else if (v.is_bool()) {
    out += v.as_bool() ? "true" : "false";
  } else if (v.is_int()) {
    out += std::to_string(v.as_int());
  } else if (v.is_float()) {
    const double d = v.as_number();
    out += std::isnan(d)   ? "NaN"
           : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity")
                           : float_str(d);
  } else {
    throw RenderError("tojson: a " + std::string(v.type_name()) + " is not JSON serializable");
  }
}

}  // namespace

bool Value::truthy() const {
  if (is_undefined() || is_none()) return false;
  if (is_bool()) return as_bool();
  if (is_int()) return as_int() != 0;
  if (is_float()) return as_number() != 0.0;
  if (is_string()) return !as_string().empty();
  if (is_list()) return !as_list().empty();
  if (is_dict()) return !as_dict().empty();
  return true;
}

std::string Value::str() const {
  if (is_undefined()) return "";
  if (is_none()) return "None";
  if (is_bool()) return as_bool() ? "True" : "False";
  if (is_int()) return std::to_string(as_int());
  if (is_float()) return float_str(as_number());
  if (is_string()) return as_string();
  if (is_list()) {
    std::string out = "[";
    for (std::size_t i = 0; i < as_list().size(); ++i) {
      if (i > 0) out += ", ";
      out += as_list()[i].repr();
    }
    return out + "]";
  }
  if (is_dict()) {
    std::string out = "{";
    for (std::size_t i = 0; i < as_dict().size(); ++i) {
      if (i > 0) out += ", ";
      out += quote_repr(as_dict()[i].first) + ": " + as_dict()[i].second.repr();
    }
    return out + "}";
  }
  if (is_namespace()) return "<Namespace>";
  return "<function>";
}

std::string Value::repr() const { return is_string() ? quote_repr(as_string()) : str(); }

std::string_view Value::type_name() const {
  if (is_undefined()) return "undefined";
  if (is_none()) return "none";
  if (is_bool()) return "boolean";
  if (is_int()) return "integer";
  if (is_float()) return "float";
  if (is_string()) return "string";
  if (is_list()) return "list";
  if (is_dict()) return "dict";
  if (is_namespace()) return "namespace";
  return "function";
}

Value Value::member(std::string_view name) const {
  if (is_dict()) {
    const Value* v = find(as_dict(), name);
    return v != nullptr ? *v : Value();
  }
  if (is_namespace()) {
    const Value* v = find(as_namespace().attrs, name);
    return v != nullptr ? *v : Value();
  }
  return Value();
}

const Value* find(const Dict& dict, std::string_view key) {
  for (const auto& [k, v] : dict) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_number() == b.as_number();
    return a.as_int() == b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() == b.as_string();
  if (a.is_none() || b.is_none()) return a.is_none() && b.is_none();
  if (a.is_undefined() || b.is_undefined()) return a.is_undefined() && b.is_undefined();
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (!equal(x[i], y[i])) return false;
    }
    return true;
  }
  if (a.is_dict() && b.is_dict()) {
    const Dict &x = a.as_dict(), &y = b.as_dict();
    if (x.size() != y.size()) return false;
    for (const auto& [k, v] : x) {
      const Value* w = find(y, k);
      if (w == nullptr || !equal(v, *w)) return false;
    }
    return true;
  }
  return false;
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_number() < b.as_number();
  if (a.is_string() && b.is_string())
    return a.as_string() < b.as_string();  // UTF-8 order = code point order
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (less(x[i], y[i])) return true;
      if (less(y[i], x[i])) return false;
    }
    return x.size() < y.size();
  }
  throw RenderError("cannot compare " + std::string(a.type_name()) + " with " +
                    std::string(b.type_name()));
}

std::string to_json(const Value& v, int indent) {
  std::string out;
  json_value(out, v, indent, 0);
  return out;
}

}  // namespace ic::chat_template
