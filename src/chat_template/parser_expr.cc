// Expressions, in Jinja2's precedence (lowest first): conditional, or, and,
// not, comparisons and `in`, + -, ~, * / // %, **, unary minus, then postfix
// (.attr, [index], [slice], call) and filters / tests.

#include <algorithm>

#include "chat_template/builtins.hh"
#include "chat_template/parser_impl.hh"

namespace ic::chat_template::detail {

ExprPtr Parser::expression() {
  const Nest nest(*this);
  ExprPtr e = or_expr();
  while (is_name("if")) {
    const int line = take().line;
    auto c = make(Expr::kCond, line);
    c->args.push_back(or_expr());
    c->args.push_back(std::move(e));
    c->args.push_back(accept_name("else") ? expression() : nullptr);
    e = std::move(c);
  }
  return e;
}

ExprPtr Parser::combine(Expr::Kind kind, int line, std::string op, ExprPtr lhs, ExprPtr rhs) {
  // (a + b) + c adds as a + b + c: one chain node, whose strings the render
  // joins (or writes out) at once instead of through a string per "+".
  if (kind == Expr::kBinary && op == "+" && lhs->kind == Expr::kBinary && lhs->op == Expr::kAdd) {
    lhs->args.push_back(std::move(rhs));
    return lhs;
  }
  auto b = make(kind, line, std::move(op));
  b->args.push_back(std::move(lhs));
  b->args.push_back(std::move(rhs));
  return b;
}

ExprPtr Parser::logical_level(Expr::Kind kind, std::string_view word, ExprPtr (Parser::*next)()) {
  ExprPtr e = (this->*next)();
  while (is_name(word)) {
    const int line = take().line;
    e = combine(kind, line, {}, std::move(e), (this->*next)());
  }
  return e;
}

ExprPtr Parser::or_expr() { return logical_level(Expr::kOr, "or", &Parser::and_expr); }

ExprPtr Parser::and_expr() { return logical_level(Expr::kAnd, "and", &Parser::not_expr); }

ExprPtr Parser::not_expr() {
  const Nest nest(*this);
  if (is_name("not")) {
    auto u = make(Expr::kUnary, take().line, "not");
    u->args.push_back(not_expr());
    return u;
  }
  return compare();
}

ExprPtr Parser::compare() {
  ExprPtr e = math1();
  for (;;) {
    std::string op;
    if (peek().type == Token::kOp &&
        (peek().value == "==" || peek().value == "!=" || peek().value == "<" ||
         peek().value == "<=" || peek().value == ">" || peek().value == ">=")) {
      op = peek().value;
      take();
    } else if (is_name("in")) {
      take();
      op = "in";
    } else if (is_name("not") && is_name("in", 1)) {
      take();
      take();
      op = "not in";
    } else {
      return e;
    }
    const int line = peek().line;
    e = combine(Expr::kBinary, line, std::move(op), std::move(e), math1());
  }
}

ExprPtr Parser::binary_level(ExprPtr (Parser::*next)(),
                             std::initializer_list<std::string_view> ops) {
  ExprPtr e = (this->*next)();
  for (;;) {
    const bool more =
        std::any_of(ops.begin(), ops.end(), [&](std::string_view op) { return is_op(op); });
    if (!more) return e;
    const Token& op = take();
    e = combine(Expr::kBinary, op.line, op.value, std::move(e), (this->*next)());
  }
}

ExprPtr Parser::math1() { return binary_level(&Parser::concat, {"+", "-"}); }

ExprPtr Parser::concat() { return binary_level(&Parser::math2, {"~"}); }

ExprPtr Parser::math2() { return binary_level(&Parser::power, {"*", "/", "//", "%"}); }

ExprPtr Parser::power() { return binary_level(&Parser::unary, {"**"}); }

ExprPtr Parser::unary() {
  const Nest nest(*this);
  if (is_op("-") || is_op("+")) {
    auto u = make(Expr::kUnary, peek().line, take().value);
    u->args.push_back(postfix(primary()));
    return filters(std::move(u));
  }
  return filters(postfix(primary()));
}

ExprPtr Parser::primary() {
  const Token& tok = peek();
  auto lit = make(Expr::kLiteral, tok.line);
  switch (tok.type) {
    case Token::kString: {
      std::string s;
      while (peek().type == Token::kString) s += take().value;  // adjacent literals join
      lit->literal = Value(std::move(s));
      return lit;
    }
    case Token::kInt:
      lit->literal = Value(static_cast<std::int64_t>(std::stoll(take().value)));
      return lit;
    case Token::kFloat:
      lit->literal = Value(std::stod(take().value));
      return lit;
    case Token::kName: {
      const std::string name = take().value;
      if (name == "true" || name == "True")
        lit->literal = Value(true);
      else if (name == "false" || name == "False")
        lit->literal = Value(false);
      else if (name == "none" || name == "None")
        lit->literal = Value(None{});
      else
        return make(Expr::kName, tok.line, name);
      return lit;
    }
    default:
      break;
  }
  if (is_op("(")) {
    take();
    ExprPtr e = expression();
    if (is_op(",")) {  // a tuple: a list for our purposes
      auto list = make(Expr::kList, tok.line);
      list->args.push_back(std::move(e));
      while (is_op(",")) {
        take();
        if (is_op(")")) break;
        list->args.push_back(expression());
      }
      e = std::move(list);
    }
    expect_op(")");
    return e;
  }
  if (is_op("[") || is_op("{")) {
    const bool dict = take().value == "{";
    auto c = make(dict ? Expr::kDict : Expr::kList, tok.line);
    const std::string_view close = dict ? "}" : "]";
    while (!is_op(close)) {
      c->args.push_back(expression());
      if (dict) {
        expect_op(":");
        c->args.push_back(expression());
      }
      if (!is_op(close)) expect_op(",");
    }
    take();
    return c;
  }
  fail("unexpected '" + tok.value + "' in an expression");
}

ExprPtr Parser::postfix(ExprPtr e) {
  for (;;) {
    if (is_op(".")) {
      const int line = take().line;
      auto a = make(Expr::kAttr, line, peek().type == Token::kInt ? take().value : expect_name());
      a->args.push_back(std::move(e));
      e = std::move(a);
    } else if (is_op("[")) {
      const int line = take().line;
      ExprPtr parts[3];
      int part = 0;
      bool slice = false;
      while (!is_op("]")) {
        if (is_op(":")) {
          take();
          slice = true;
          if (++part > 2) fail("too many ':' in a slice");
          continue;
        }
        parts[part] = expression();
      }
      take();
      auto x = make(slice ? Expr::kSlice : Expr::kIndex, line);
      x->args.push_back(std::move(e));
      if (!slice && !parts[0]) fail("empty subscript");
      for (int k = 0; k < (slice ? 3 : 1); ++k) x->args.push_back(std::move(parts[k]));
      e = std::move(x);
    } else if (is_op("(")) {
      auto c = make(Expr::kCall, peek().line);
      c->args.push_back(std::move(e));
      call_args(*c);
      e = std::move(c);
    } else {
      return e;
    }
  }
}

// "(" args ")" with positional then keyword arguments; appends to `call`.
void Parser::call_args(Expr& call) {
  expect_op("(");
  while (!is_op(")")) {
    if (peek().type == Token::kName && is_op("=", 1)) {
      std::string key = take().value;
      take();
      call.kwargs.emplace_back(std::move(key), expression());
    } else {
      call.args.push_back(expression());
    }
    if (!is_op(")")) expect_op(",");
  }
  take();
}

ExprPtr Parser::filters(ExprPtr e) {
  for (;;) {
    if (is_op("|")) {
      const int line = take().line;
      const std::string name = expect_name();
      if (!is_known_filter(name)) fail("unsupported filter '" + name + "'");
      auto f = make(Expr::kFilter, line, name);
      f->args.push_back(std::move(e));
      if (is_op("(")) call_args(*f);
      e = postfix(std::move(f));
    } else if (is_name("is")) {
      e = test(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::test(ExprPtr e) {
  const int line = take().line;  // "is"
  bool negate = false;
  if (is_name("not")) {
    take();
    negate = true;
  }
  std::string name = expect_name();
  if (!is_known_test(name)) fail("unsupported test '" + name + "'");
  auto t = make(Expr::kTest, line, name);
  t->negate = negate;
  t->args.push_back(std::move(e));
  if (is_op("(")) {
    call_args(*t);
  } else if (peek().type == Token::kString || peek().type == Token::kInt ||
             peek().type == Token::kFloat ||
             (peek().type == Token::kName && !is_name("and") && !is_name("or") &&
              !is_name("else") && !is_name("if") && !is_name("is") && !is_name("in") &&
              !is_name("not"))) {
    t->args.push_back(postfix(primary()));  // `is divisibleby 3`, `is equalto x`
  }
  return t;
}

}  // namespace ic::chat_template::detail
