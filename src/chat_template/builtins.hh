#pragma once
// Filters, tests, methods and globals of the Jinja subset, with Python's
// semantics (transformers renders with Python Jinja2): strip() without
// arguments removes Unicode white space (str.isspace), split() without a
// separator splits on white-space runs, lengths and indices count code
// points. upper/lower/title/capitalize map ASCII letters only.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat_template/value.hh"

namespace ic::chat_template {

using Args = std::vector<Value>;
using Kwargs = std::vector<std::pair<std::string, Value>>;

// Names the parser accepts after `|` and `is`.
bool is_known_filter(std::string_view name);
bool is_known_test(std::string_view name);

// Python `item in container` (substring, list member, dict key).
bool contains(const Value& container, const Value& item);
// `value | name(args, kwargs)`; RenderError on a type error.
Value apply_filter(std::string_view name, const Value& value, Args& args, Kwargs& kwargs);
// `value is name(args)`.
bool apply_test(std::string_view name, const Value& value, const Args& args);
// `object.name(args, kwargs)` for string, dict and list methods; RenderError
// if `object` has no such method.
Value call_method(const Value& object, std::string_view name, Args& args, Kwargs& kwargs);
// True when `object.name` is a method call call_method() knows.
bool has_method(const Value& object, std::string_view name);

// The global functions templates use: raise_exception(msg) (throws
// RenderError with msg), namespace(**kw), range(...), strftime_now(fmt),
// dict(**kw).
Dict make_globals();

// Code points of a UTF-8 string, and the string of a code point range.
std::vector<char32_t> code_points(std::string_view s);
std::string from_code_points(const std::vector<char32_t>& cps, std::size_t begin, std::size_t end);

}  // namespace ic::chat_template
