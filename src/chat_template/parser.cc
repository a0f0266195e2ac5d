#include "chat_template/parser.hh"

#include <string_view>

#include "chat_template/parser_impl.hh"

namespace ic::chat_template {
namespace detail {

namespace {

// The operator a kUnary / kBinary node's name spells (the lexer and the
// parser let through only these).
Expr::Op op_of(Expr::Kind kind, std::string_view name) {
  if (kind == Expr::kUnary)
    return name == "not" ? Expr::kNot : name == "-" ? Expr::kNeg : Expr::kPos;
  static constexpr std::pair<std::string_view, Expr::Op> kOps[] = {
      {"+", Expr::kAdd},       {"-", Expr::kSub}, {"*", Expr::kMul},  {"/", Expr::kDiv},
      {"//", Expr::kFloorDiv}, {"%", Expr::kMod}, {"**", Expr::kPow}, {"~", Expr::kConcat},
      {"==", Expr::kEq},       {"!=", Expr::kNe}, {"<", Expr::kLt},   {"<=", Expr::kLe},
      {">", Expr::kGt},        {">=", Expr::kGe}, {"in", Expr::kIn},  {"not in", Expr::kNotIn}};
  for (const auto& [spelled, op] : kOps) {
    if (spelled == name) return op;
  }
  return Expr::kNoOp;
}

}  // namespace

ExprPtr Parser::make(Expr::Kind kind, int line, std::string name) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  if (kind == Expr::kUnary || kind == Expr::kBinary) e->op = op_of(kind, name);
  e->name = std::move(name);
  return e;
}

Body Parser::body(std::initializer_list<std::string_view> stops, std::string* stopped) {
  const Nest nest(*this);
  Body out;
  for (;;) {
    const Token& tok = peek();
    if (tok.type == Token::kEof) {
      if (stops.size() != 0) fail("missing end tag (expected one of the block's end tags)");
      return out;
    }
    if (tok.type == Token::kBlockBegin && peek(1).type == Token::kName) {
      for (std::string_view stop : stops) {
        if (peek(1).value == stop) {
          take();
          *stopped = take().value;
          return out;
        }
      }
    }
    out.push_back(statement());
  }
}

StmtPtr Parser::statement() {
  const Token tok = take();
  auto s = std::make_unique<Stmt>();
  s->line = tok.line;
  if (tok.type == Token::kText) {
    s->kind = Stmt::kText;
    s->text = tok.value;
    return s;
  }
  if (tok.type == Token::kVarBegin) {
    s->kind = Stmt::kOutput;
    s->expr = expression();
    if (peek().type != Token::kVarEnd) fail("expected '}}'");
    take();
    return s;
  }
  if (tok.type != Token::kBlockBegin) fail("unexpected token");
  const std::string keyword = expect_name();
  if (keyword == "if") return if_stmt(tok.line);
  if (keyword == "for") return for_stmt(tok.line);
  if (keyword == "set") return set_stmt(tok.line);
  if (keyword == "macro") return macro_stmt(tok.line);
  if (keyword == "break" || keyword == "continue") {
    s->kind = keyword == "break" ? Stmt::kBreak : Stmt::kContinue;
    expect_block_end();
    return s;
  }
  if (keyword == "generation") {  // transformers' assistant-mask marker: renders its body
    expect_block_end();
    std::string stopped;
    Body inner = block({"endgeneration"}, &stopped);
    s->kind = Stmt::kIf;
    s->branches.emplace_back(make(Expr::kLiteral, tok.line), std::move(inner));
    s->branches.back().first->literal = Value(true);
    return s;
  }
  fail("unsupported statement '" + keyword + "'");
}

StmtPtr Parser::make_stmt(Stmt::Kind kind, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = line;
  return s;
}

StmtPtr Parser::if_stmt(int line) {
  StmtPtr s = make_stmt(Stmt::kIf, line);
  ExprPtr cond = expression();
  expect_block_end();
  std::string stopped;
  for (;;) {
    // An elif tag carries its condition before the `%}`, so only the last
    // branch's stop tag is closed here.
    Body b = body({"elif", "else", "endif"}, &stopped);
    s->branches.emplace_back(std::move(cond), std::move(b));
    if (stopped != "elif") break;
    cond = expression();
    expect_block_end();
  }
  expect_block_end();
  if (stopped == "else") s->else_body = block({"endif"}, &stopped);
  return s;
}

StmtPtr Parser::for_stmt(int line) {
  StmtPtr s = make_stmt(Stmt::kFor, line);
  do {
    s->targets.push_back(expect_name());
  } while (accept_op(","));
  if (!accept_name("in")) fail("expected 'in'");
  s->expr = or_expr();  // no conditional expression: "if" starts the loop filter
  if (accept_name("if")) s->cond = expression();
  if (is_name("recursive")) fail("recursive loops are not supported");
  expect_block_end();
  std::string stopped;
  s->body = block({"else", "endfor"}, &stopped);
  if (stopped == "else") s->else_body = block({"endfor"}, &stopped);
  return s;
}

StmtPtr Parser::set_stmt(int line) {
  StmtPtr s = make_stmt(Stmt::kSet, line);
  s->targets.push_back(expect_name());
  if (accept_op(".")) s->attr = expect_name();
  while (s->attr.empty() && accept_op(",")) s->targets.push_back(expect_name());
  if (peek().type == Token::kBlockEnd && s->targets.size() == 1 && s->attr.empty()) {
    take();  // {% set name %}…{% endset %}
    std::string stopped;
    s->body = block({"endset"}, &stopped);
    return s;
  }
  expect_op("=");
  s->expr = expression();
  expect_block_end();
  return s;
}

StmtPtr Parser::macro_stmt(int line) {
  StmtPtr s = make_stmt(Stmt::kMacro, line);
  s->name = expect_name();
  expect_op("(");
  while (!is_op(")")) {
    std::string param = expect_name();
    ExprPtr def = accept_op("=") ? expression() : nullptr;
    s->params.emplace_back(std::move(param), std::move(def));
    if (!is_op(")")) expect_op(",");
  }
  take();
  expect_block_end();
  std::string stopped;
  s->body = block({"endmacro"}, &stopped);
  return s;
}

}  // namespace detail

Body parse(const std::vector<Token>& tokens) {
  detail::Parser p(tokens);
  return p.body({}, nullptr);
}

}  // namespace ic::chat_template
