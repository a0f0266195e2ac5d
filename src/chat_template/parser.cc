#include "chat_template/parser.hh"

#include <string_view>

#include "chat_template/parser_impl.hh"

namespace ic::chat_template {
namespace detail {

ExprPtr Parser::make(Expr::Kind kind, int line, std::string name) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  e->name = std::move(name);
  return e;
}

Body Parser::body(std::initializer_list<std::string_view> stops, std::string* stopped) {
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
    Body inner = body({"endgeneration"}, &stopped);
    expect_block_end();
    s->kind = Stmt::kIf;
    s->branches.emplace_back(make(Expr::kLiteral, tok.line), std::move(inner));
    s->branches.back().first->literal = Value(true);
    return s;
  }
  fail("unsupported statement '" + keyword + "'");
}

StmtPtr Parser::if_stmt(int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = Stmt::kIf;
  s->line = line;
  ExprPtr cond = expression();
  expect_block_end();
  for (;;) {
    std::string stopped;
    Body b = body({"elif", "else", "endif"}, &stopped);
    s->branches.emplace_back(std::move(cond), std::move(b));
    if (stopped == "elif") {
      cond = expression();
      expect_block_end();
      continue;
    }
    expect_block_end();
    if (stopped == "else") {
      s->else_body = body({"endif"}, &stopped);
      expect_block_end();
    }
    return s;
  }
}

StmtPtr Parser::for_stmt(int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = Stmt::kFor;
  s->line = line;
  s->targets.push_back(expect_name());
  while (is_op(",")) {
    take();
    s->targets.push_back(expect_name());
  }
  if (!is_name("in")) fail("expected 'in'");
  take();
  s->expr = or_expr();  // no conditional expression: "if" starts the loop filter
  if (is_name("if")) {
    take();
    s->cond = expression();
  }
  if (is_name("recursive")) fail("recursive loops are not supported");
  expect_block_end();
  std::string stopped;
  s->body = body({"else", "endfor"}, &stopped);
  expect_block_end();
  if (stopped == "else") {
    s->else_body = body({"endfor"}, &stopped);
    expect_block_end();
  }
  return s;
}

StmtPtr Parser::set_stmt(int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = Stmt::kSet;
  s->line = line;
  s->targets.push_back(expect_name());
  if (is_op(".")) {
    take();
    s->attr = expect_name();
  }
  while (s->attr.empty() && is_op(",")) {
    take();
    s->targets.push_back(expect_name());
  }
  if (peek().type == Token::kBlockEnd && s->targets.size() == 1 && s->attr.empty()) {
    take();  // {% set name %}…{% endset %}
    std::string stopped;
    s->body = body({"endset"}, &stopped);
    expect_block_end();
    return s;
  }
  expect_op("=");
  s->expr = expression();
  expect_block_end();
  return s;
}

StmtPtr Parser::macro_stmt(int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = Stmt::kMacro;
  s->line = line;
  s->name = expect_name();
  expect_op("(");
  while (!is_op(")")) {
    std::string param = expect_name();
    ExprPtr def;
    if (is_op("=")) {
      take();
      def = expression();
    }
    s->params.emplace_back(std::move(param), std::move(def));
    if (!is_op(")")) expect_op(",");
  }
  take();
  expect_block_end();
  std::string stopped;
  s->body = body({"endmacro"}, &stopped);
  expect_block_end();
  return s;
}

}  // namespace detail

Body parse(const std::vector<Token>& tokens) {
  detail::Parser p(tokens);
  return p.body({}, nullptr);
}

}  // namespace ic::chat_template
