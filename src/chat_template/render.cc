#include "chat_template/render.hh"

#include <algorithm>
#include <cmath>
#include <limits>

#include "chat_template/builtins.hh"
#include "chat_template/template.hh"

namespace ic::chat_template::detail {
namespace {

std::string at(int line) { return "line " + std::to_string(line) + ": "; }

// int64 +, −, × as Python's ints, within int64: over it is a render error
// (a variable of a prompt template can be any int64).
[[noreturn]] void overflow() { throw RenderError("integer overflow"); }
std::int64_t add_i64(std::int64_t x, std::int64_t y) {
  std::int64_t z = 0;
  if (__builtin_add_overflow(x, y, &z)) overflow();
  return z;
}
std::int64_t sub_i64(std::int64_t x, std::int64_t y) {
  std::int64_t z = 0;
  if (__builtin_sub_overflow(x, y, &z)) overflow();
  return z;
}
std::int64_t mul_i64(std::int64_t x, std::int64_t y) {
  std::int64_t z = 0;
  if (__builtin_mul_overflow(x, y, &z)) overflow();
  return z;
}

// - * / // % ** (`op`, spelled `symbol` in errors).
Value arithmetic(Expr::Op op, const std::string& symbol, const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) {
    if (op == Expr::kMul && a.is_string() && b.is_int()) {
      const std::int64_t n = std::max<std::int64_t>(0, b.as_int());
      const std::size_t size = a.as_string().size();
      if (size > 0 && static_cast<std::uint64_t>(n) > kMaxOutputBytes / size)
        throw RenderError("output over " + std::to_string(kMaxOutputBytes) + " bytes");
      std::string out;
      for (std::int64_t i = 0; i < n; ++i) out += a.as_string();
      return Value(std::move(out));
    }
    throw RenderError("unsupported operand types for " + symbol + ": " +
                      std::string(a.type_name()) + " and " + std::string(b.type_name()));
  }
  const bool ints = !a.is_float() && !b.is_float();
  if (ints && op != Expr::kDiv && op != Expr::kPow) {
    const std::int64_t x = a.as_int(), y = b.as_int();
    if (op == Expr::kSub) return Value(sub_i64(x, y));
    if (op == Expr::kMul) return Value(mul_i64(x, y));
    if (y == 0) throw RenderError("division by zero");
    if (y == -1 && x == std::numeric_limits<std::int64_t>::min()) overflow();
    std::int64_t q = x / y, r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) {  // Python floors
      --q;
      r += y;
    }
    return Value(op == Expr::kFloorDiv ? q : r);
  }
  const double x = a.as_number(), y = b.as_number();
  if (op == Expr::kSub) return Value(x - y);
  if (op == Expr::kMul) return Value(x * y);
  if (op == Expr::kPow) {
    const double p = std::pow(x, y);
    if (!ints || b.as_int() < 0) return Value(p);
    // 2^63 is the first double outside int64.
    if (!(p >= -9223372036854775808.0 && p < 9223372036854775808.0)) overflow();
    return Value(static_cast<std::int64_t>(p));
  }
  if (y == 0) throw RenderError("division by zero");
  if (op == Expr::kDiv) return Value(x / y);
  if (op == Expr::kFloorDiv) return Value(std::floor(x / y));
  return Value(x - y * std::floor(x / y));
}

// What "+" and "~" build is bounded like the output (kMaxOutputBytes, or as
// many list items): a loop doubling a string or a list would otherwise take
// all memory within 40 iterations.
void check_built(std::size_t size, bool list = false) {
  if (size > kMaxOutputBytes)
    throw RenderError((list ? "a list over " : "a string over ") + std::to_string(kMaxOutputBytes) +
                      (list ? " items" : " bytes"));
}

Value add(const Value& a, const Value& b) {
  if (a.is_string() && b.is_string()) {
    check_built(a.as_string().size() + b.as_string().size());
    return Value(a.as_string() + b.as_string());
  }
  if (a.is_list() && b.is_list()) {
    check_built(a.as_list().size() + b.as_list().size(), true);
    List out = a.as_list();
    out.insert(out.end(), b.as_list().begin(), b.as_list().end());
    return Value(std::move(out));
  }
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return Value(a.as_number() + b.as_number());
    return Value(add_i64(a.as_int(), b.as_int()));
  }
  throw RenderError("unsupported operand types for +: " + std::string(a.type_name()) + " and " +
                    std::string(b.type_name()));
}

// Python slice bounds over `n` items.
std::vector<std::size_t> slice_indices(std::int64_t n, const Value& start, const Value& stop,
                                       const Value& step_v) {
  const std::int64_t step = step_v.is_undefined() || step_v.is_none() ? 1 : step_v.as_int();
  if (step == 0) throw RenderError("slice step cannot be zero");
  auto bound = [&](const Value& v, std::int64_t def) {
    if (v.is_undefined() || v.is_none()) return def;
    std::int64_t i = v.as_int();
    if (i < 0) i += n;
    return step > 0 ? std::clamp<std::int64_t>(i, 0, n) : std::clamp<std::int64_t>(i, -1, n - 1);
  };
  const std::int64_t b = bound(start, step > 0 ? 0 : n - 1);
  const std::int64_t e = bound(stop, step > 0 ? n : -1);
  std::vector<std::size_t> out;
  for (std::int64_t i = b; step > 0 ? i < e : i > e;) {
    out.push_back(static_cast<std::size_t>(i));
    if (__builtin_add_overflow(i, step, &i)) break;  // past the end either way
  }
  return out;
}

// `loop` in a for loop's body at item i of `items`. Built in place: a Dict
// from an initializer list copies each key and value twice (~9 % of a
// 100k-token conversation's render, perf/gateway_pick.cc).
Value loop_variable(const List& items, std::int64_t i) {
  const auto n = static_cast<std::int64_t>(items.size());
  Dict loop;
  loop.reserve(9);
  loop.emplace_back("index", Value(i + 1));
  loop.emplace_back("index0", Value(i));
  loop.emplace_back("revindex", Value(n - i));
  loop.emplace_back("revindex0", Value(n - i - 1));
  loop.emplace_back("first", Value(i == 0));
  loop.emplace_back("last", Value(i == n - 1));
  loop.emplace_back("length", Value(n));
  loop.emplace_back("previtem", i > 0 ? items[static_cast<std::size_t>(i - 1)] : Value());
  loop.emplace_back("nextitem", i + 1 < n ? items[static_cast<std::size_t>(i + 1)] : Value());
  return Value(std::move(loop));
}

}  // namespace

Renderer::Renderer(Dict scope, std::string& out, const RenderOptions& options)
    : out_(&out),
      root_(&out),
      max_output_bytes_(std::min(options.max_output_bytes, kMaxOutputBytes)),
      probe_(options.probe) {
  frames_.push_back(std::move(scope));
}

void Renderer::run(const Body& body) { exec(body); }

void Renderer::make_room(std::size_t size) const {
  if (out_->size() + size > max_output_bytes_)
    throw RenderError("output over " + std::to_string(max_output_bytes_) + " bytes");
}

void Renderer::emit(const std::string& text) {
  make_room(text.size());
  *out_ += text;
}

// {{ e }}. A string is written as it is, and a + chain of strings one operand
// after the other: the chat templates' '<|im_start|>' + message.role + '\n' +
// message.content + … otherwise copied each message's content twice more
// (joined, then str()) before writing it.
void Renderer::output(const Expr& e) {
  if (e.kind == Expr::kBinary && e.op == Expr::kAdd) {
    std::vector<Value> run;
    std::size_t size = 0;
    Value folded;
    if (!sum_strings(e, run, size, folded)) return output(folded);
    make_room(size);
    for (const Value& s : run) *out_ += s.as_string();
    return;
  }
  output(eval(e));
}

void Renderer::output(const Value& v) {
  if (v.is_string()) return emit(v.as_string());
  emit(v.str());
}

Value Renderer::lookup(const std::string& name) {
  for (auto f = frames_.rbegin(); f != frames_.rend(); ++f) {
    const Value* v = find(*f, name);
    if (v == nullptr) continue;
    // frames_.front() is the outermost scope (in a macro too).
    if (probe_ != nullptr && f + 1 == frames_.rend() &&
        std::find(probe_->watched.begin(), probe_->watched.end(), name) != probe_->watched.end()) {
      if (watched_reads_++ == 0) probe_->first_read = root_->size();
    }
    return *v;
  }
  return Value();
}

void Renderer::assign(const std::string& name, Value value) {
  Dict& frame = frames_.back();
  for (auto& [k, v] : frame) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  frame.emplace_back(name, std::move(value));
}

Renderer::Flow Renderer::exec(const Body& body) {
  for (const StmtPtr& s : body) {
    const Flow f = exec(*s);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::exec(const Stmt& s) {
  try {
    switch (s.kind) {
      case Stmt::kText:
        emit(s.text);
        return Flow::kNormal;
      case Stmt::kOutput: {
        const std::size_t reads = watched_reads_;
        const std::size_t before = root_->size();
        output(*s.expr);
        if (watched_reads_ != reads && out_ == root_) {
          probe_->watched_output_bytes += root_->size() - before;
        }
        return Flow::kNormal;
      }
      case Stmt::kIf:
        for (const auto& [cond, body] : s.branches) {
          if (eval(*cond).truthy()) return exec(body);
        }
        return exec(s.else_body);
      case Stmt::kFor:
        return exec_for(s);
      case Stmt::kSet:
        exec_set(s);
        return Flow::kNormal;
      case Stmt::kMacro:
        assign(s.name, make_macro(s));
        return Flow::kNormal;
      case Stmt::kBreak:
        return Flow::kBreak;
      case Stmt::kContinue:
        return Flow::kContinue;
    }
  } catch (const RenderError& e) {
    const std::string what = e.what();
    if (what.rfind("line ", 0) == 0) throw;
    throw RenderError(at(s.line) + what);
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::exec_for(const Stmt& s) {
  const Value iterable = eval(*s.expr);
  List items;
  if (iterable.is_list()) {
    items = iterable.as_list();
  } else if (iterable.is_dict()) {
    for (const auto& [k, _] : iterable.as_dict()) items.emplace_back(k);
  } else if (iterable.is_string()) {
    Args none;
    Kwargs no_kw;
    items = apply_filter("list", iterable, none, no_kw).as_list();
  } else if (!iterable.is_undefined()) {
    throw RenderError("a " + std::string(iterable.type_name()) + " is not iterable");
  }
  frames_.emplace_back();
  auto bind = [&](const Value& item) {
    if (s.targets.size() == 1) return assign(s.targets[0], item);
    if (!item.is_list() || item.as_list().size() != s.targets.size())
      throw RenderError("cannot unpack into " + std::to_string(s.targets.size()) + " names");
    for (std::size_t k = 0; k < s.targets.size(); ++k) assign(s.targets[k], item.as_list()[k]);
  };
  if (s.cond) {  // the loop filter runs first: loop.length counts what passes
    List kept;
    for (const Value& item : items) {
      bind(item);
      if (eval(*s.cond).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  const auto n = static_cast<std::int64_t>(items.size());
  for (std::int64_t i = 0; i < n; ++i) {
    if (++iterations_ > kMaxLoopIterations) throw RenderError("too many loop iterations");
    bind(items[static_cast<std::size_t>(i)]);
    assign("loop", loop_variable(items, i));
    if (exec(s.body) == Flow::kBreak) break;
  }
  frames_.pop_back();
  if (n == 0) return exec(s.else_body);
  return Flow::kNormal;
}

void Renderer::exec_set(const Stmt& s) {
  Value value;
  if (s.expr) {
    value = eval(*s.expr);
  } else {  // {% set x %}…{% endset %}
    std::string captured;
    std::string* outer = out_;
    out_ = &captured;
    exec(s.body);
    out_ = outer;
    value = Value(std::move(captured));
  }
  if (!s.attr.empty()) {
    const Value ns = lookup(s.targets[0]);
    if (!ns.is_namespace()) throw RenderError("cannot set an attribute of a non-namespace");
    Dict& attrs = ns.as_namespace().attrs;
    for (auto& [k, v] : attrs) {
      if (k == s.attr) {
        v = std::move(value);
        return;
      }
    }
    attrs.emplace_back(s.attr, std::move(value));
    return;
  }
  if (s.targets.size() == 1) return assign(s.targets[0], std::move(value));
  if (!value.is_list() || value.as_list().size() != s.targets.size())
    throw RenderError("cannot unpack into " + std::to_string(s.targets.size()) + " names");
  for (std::size_t k = 0; k < s.targets.size(); ++k) assign(s.targets[k], value.as_list()[k]);
}

// A macro call renders its body in a frame of the globals plus its
// parameters (not the caller's locals), into a string.
Value Renderer::make_macro(const Stmt& s) {
  const Stmt* macro = &s;
  return Value(Function([this, macro](Args& args, Kwargs& kw) -> Value {
    if (macro_depth_ >= kMaxMacroDepth) throw RenderError("macros nested too deeply");
    if (++macro_calls_ > kMaxMacroCalls) throw RenderError("too many macro calls");
    Dict frame;
    for (std::size_t k = 0; k < macro->params.size(); ++k) {
      const auto& [name, def] = macro->params[k];
      const Value* given = k < args.size() ? &args[k] : nullptr;
      for (auto& [key, v] : kw) {
        if (key == name) given = &v;
      }
      frame.emplace_back(name, given != nullptr ? *given : def ? eval(*def) : Value());
    }
    std::vector<Dict> saved;
    saved.swap(frames_);
    frames_.push_back(saved.front());
    frames_.push_back(std::move(frame));
    std::string captured;
    std::string* outer = out_;
    out_ = &captured;
    ++macro_depth_;
    try {
      exec(macro->body);
    } catch (...) {
      --macro_depth_;
      out_ = outer;
      frames_.swap(saved);
      throw;
    }
    --macro_depth_;
    out_ = outer;
    frames_.swap(saved);
    return Value(std::move(captured));
  }));
}

Value Renderer::eval(const Expr& e) {
  switch (e.kind) {
    case Expr::kLiteral:
      return e.literal;
    case Expr::kName:
      return lookup(e.name);
    case Expr::kList: {
      List out;
      for (const ExprPtr& a : e.args) out.push_back(eval(*a));
      return Value(std::move(out));
    }
    case Expr::kDict: {
      Dict out;
      for (std::size_t k = 0; k + 1 < e.args.size(); k += 2)
        out.emplace_back(eval(*e.args[k]).str(), eval(*e.args[k + 1]));
      return Value(std::move(out));
    }
    case Expr::kAttr: {
      const Value object = eval(*e.args[0]);
      if (has_method(object, e.name)) {
        const std::string name = e.name;
        return Value(Function(
            [object, name](Args& a, Kwargs& kw) { return call_method(object, name, a, kw); }));
      }
      // eval_index() with the name as a key, without making it a Value (a
      // string allocated per message.role / message.content).
      if (object.is_dict() || object.is_namespace()) return object.member(e.name);
      return Value();
    }
    case Expr::kIndex:
      return eval_index(eval(*e.args[0]), eval(*e.args[1]));
    case Expr::kSlice:
      return eval_slice(e);
    case Expr::kCall:
    case Expr::kFilter:
      return eval_call(e);
    case Expr::kTest: {
      Args args;
      for (std::size_t k = 1; k < e.args.size(); ++k) args.push_back(eval(*e.args[k]));
      return Value(apply_test(e.name, eval(*e.args[0]), args) != e.negate);
    }
    case Expr::kUnary: {
      const Value v = eval(*e.args[0]);
      if (e.op == Expr::kNot) return Value(!v.truthy());
      if (!v.is_number()) throw RenderError("bad operand type for unary " + e.name);
      if (e.op == Expr::kPos) return v;
      if (v.is_float()) return Value(-v.as_number());
      return Value(sub_i64(0, v.as_int()));
    }
    case Expr::kBinary:
      return eval_binary(e);
    case Expr::kAnd: {
      Value a = eval(*e.args[0]);
      return a.truthy() ? eval(*e.args[1]) : a;
    }
    case Expr::kOr: {
      Value a = eval(*e.args[0]);
      return a.truthy() ? a : eval(*e.args[1]);
    }
    case Expr::kCond:
      if (eval(*e.args[0]).truthy()) return eval(*e.args[1]);
      return e.args[2] ? eval(*e.args[2]) : Value();
  }
  return Value();
}

// A + chain, left to right as Jinja adds. Its leading run of strings is
// joined once at its final size: a chat template's
// '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n'
// copied each message's content once per "+" after it (a 100k-token
// conversation's render was ~40 % of its pick, perf/gateway_pick.cc).
Value Renderer::eval_sum(const Expr& e) {
  // One "+" (loop.index0 + 1 and the like): nothing to join, nothing to collect.
  if (e.args.size() == 2) {
    const Value a = eval(*e.args[0]);
    return add(a, eval(*e.args[1]));
  }
  std::vector<Value> run;
  std::size_t size = 0;
  Value folded;
  if (!sum_strings(e, run, size, folded)) return folded;
  return join(run, size);
}

bool Renderer::sum_strings(const Expr& e, std::vector<Value>& run, std::size_t& size,
                           Value& folded) {
  Value first = eval(*e.args[0]);
  if (!first.is_string()) {
    folded = fold_sum(std::move(first), e, 1);
    return false;
  }
  run.reserve(e.args.size());
  size = first.as_string().size();
  run.push_back(std::move(first));
  for (std::size_t i = 1; i < e.args.size(); ++i) {
    Value v = eval(*e.args[i]);
    if (!v.is_string()) {
      folded = fold_sum(add(join(run, size), v), e, i + 1);
      return false;
    }
    size += v.as_string().size();
    check_built(size);
    run.push_back(std::move(v));
  }
  return true;
}

// The rest of the + chain `e` from its operand i, one "+" at a time.
Value Renderer::fold_sum(Value acc, const Expr& e, std::size_t i) {
  for (; i < e.args.size(); ++i) acc = add(acc, eval(*e.args[i]));
  return acc;
}

Value Renderer::join(const std::vector<Value>& strings, std::size_t size) {
  if (strings.size() == 1) return strings.front();
  std::string out;
  out.reserve(size);
  for (const Value& s : strings) out += s.as_string();
  return Value(std::move(out));
}

Value Renderer::eval_binary(const Expr& e) {
  if (e.op == Expr::kAdd) return eval_sum(e);
  const Value a = eval(*e.args[0]);
  const Value b = eval(*e.args[1]);
  switch (e.op) {
    case Expr::kConcat: {
      std::string as = a.str(), bs = b.str();
      check_built(as.size() + bs.size());
      return Value(as + bs);
    }
    case Expr::kEq:
      return Value(equal(a, b));
    case Expr::kNe:
      return Value(!equal(a, b));
    case Expr::kLt:
      return Value(less(a, b));
    case Expr::kGt:
      return Value(less(b, a));
    case Expr::kLe:
      return Value(!less(b, a));
    case Expr::kGe:
      return Value(!less(a, b));
    case Expr::kIn:
      return Value(contains(b, a));
    case Expr::kNotIn:
      return Value(!contains(b, a));
    default:
      return arithmetic(e.op, e.name, a, b);
  }
}

Value Renderer::eval_index(const Value& object, const Value& key) {
  if (object.is_dict() || object.is_namespace())
    return key.is_string() ? object.member(key.as_string()) : Value();
  if (!key.is_int() && !key.is_bool()) return Value();
  std::int64_t i = key.as_int();
  if (object.is_list()) {
    const auto n = static_cast<std::int64_t>(object.as_list().size());
    if (i < 0) i += n;
    return i >= 0 && i < n ? object.as_list()[static_cast<std::size_t>(i)] : Value();
  }
  if (object.is_string()) {
    const auto cps = code_points(object.as_string());
    const auto n = static_cast<std::int64_t>(cps.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value();
    return Value(
        from_code_points(cps, static_cast<std::size_t>(i), static_cast<std::size_t>(i) + 1));
  }
  return Value();
}

Value Renderer::eval_slice(const Expr& e) {
  const Value object = eval(*e.args[0]);
  Value parts[3];
  for (int k = 0; k < 3; ++k) {
    if (e.args[static_cast<std::size_t>(k) + 1])
      parts[k] = eval(*e.args[static_cast<std::size_t>(k) + 1]);
  }
  if (object.is_list()) {
    List out;
    for (std::size_t i : slice_indices(static_cast<std::int64_t>(object.as_list().size()), parts[0],
                                       parts[1], parts[2]))
      out.push_back(object.as_list()[i]);
    return Value(std::move(out));
  }
  if (object.is_string()) {
    const auto cps = code_points(object.as_string());
    std::string out;
    for (std::size_t i :
         slice_indices(static_cast<std::int64_t>(cps.size()), parts[0], parts[1], parts[2]))
      out += from_code_points(cps, i, i + 1);
    return Value(std::move(out));
  }
  throw RenderError("a " + std::string(object.type_name()) + " cannot be sliced");
}

Value Renderer::eval_call(const Expr& e) {
  Args args;
  Kwargs kwargs;
  for (std::size_t k = 1; k < e.args.size(); ++k) args.push_back(eval(*e.args[k]));
  for (const auto& [key, value] : e.kwargs) kwargs.emplace_back(key, eval(*value));
  const Value target = eval(*e.args[0]);
  if (e.kind == Expr::kFilter) return apply_filter(e.name, target, args, kwargs);
  if (!target.is_callable())
    throw RenderError("a " + std::string(target.type_name()) + " is not callable");
  return target.as_function()(args, kwargs);
}

}  // namespace ic::chat_template::detail
