#pragma once
// The recursive-descent parser shared by parser.cc (statements) and
// parser_expr.cc (expressions, Jinja2's precedence). Internal.

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "chat_template/ast.hh"
#include "chat_template/lexer.hh"
#include "chat_template/template.hh"

namespace ic::chat_template::detail {

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  // Statements until one of `stops` (a block keyword) or the end.
  Body body(std::initializer_list<std::string_view> stops, std::string* stopped);

 private:
  // One level of nesting while it lives; past kMaxNesting the source is refused.
  class Nest {
   public:
    explicit Nest(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting) p_.fail("nested too deeply");
    }
    ~Nest() { --p_.depth_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    Parser& p_;
  };

  const Token& peek(std::size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  const Token& take() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  bool is_op(std::string_view op, std::size_t k = 0) const {
    return peek(k).type == Token::kOp && peek(k).value == op;
  }
  bool is_name(std::string_view n, std::size_t k = 0) const {
    return peek(k).type == Token::kName && peek(k).value == n;
  }
  // Takes the next token when it is the operator `op` / the name `n`.
  bool accept_op(std::string_view op) {
    if (!is_op(op)) return false;
    take();
    return true;
  }
  bool accept_name(std::string_view n) {
    if (!is_name(n)) return false;
    take();
    return true;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw SyntaxError("line " + std::to_string(peek().line) + ": " + what);
  }
  void expect_op(std::string_view op) {
    if (!is_op(op)) fail("expected '" + std::string(op) + "'");
    take();
  }
  std::string expect_name() {
    if (peek().type != Token::kName) fail("expected a name");
    return take().value;
  }
  void expect_block_end() {
    if (peek().type != Token::kBlockEnd) fail("expected '%}'");
    take();
  }
  // body() and the `%}` that closes the tag it stopped at.
  Body block(std::initializer_list<std::string_view> stops, std::string* stopped) {
    Body b = body(stops, stopped);
    expect_block_end();
    return b;
  }

  StmtPtr make_stmt(Stmt::Kind kind, int line);
  StmtPtr statement();
  StmtPtr if_stmt(int line);
  StmtPtr for_stmt(int line);
  StmtPtr set_stmt(int line);
  StmtPtr macro_stmt(int line);

  ExprPtr expression();  // conditional expression
  ExprPtr or_expr();
  ExprPtr and_expr();
  ExprPtr not_expr();
  ExprPtr compare();
  ExprPtr math1();
  ExprPtr concat();
  ExprPtr math2();
  ExprPtr power();
  // `next (word next)*` for "or" / "and", as nodes of `kind`.
  ExprPtr logical_level(Expr::Kind kind, std::string_view word, ExprPtr (Parser::*next)());
  // One left-associative level: `next (op next)*` for the operators `ops`.
  ExprPtr binary_level(ExprPtr (Parser::*next)(), std::initializer_list<std::string_view> ops);
  // A node of `kind` with the operands `lhs` and `rhs` (a "+" whose `lhs` is a
  // "+" chain: that chain, one operand longer).
  ExprPtr combine(Expr::Kind kind, int line, std::string op, ExprPtr lhs, ExprPtr rhs);
  ExprPtr unary();
  ExprPtr primary();
  ExprPtr postfix(ExprPtr e);
  ExprPtr filters(ExprPtr e);
  ExprPtr test(ExprPtr e);
  void call_args(Expr& call);
  ExprPtr make(Expr::Kind kind, int line, std::string name = {});

  const std::vector<Token>& t_;
  std::size_t i_ = 0;
  int depth_ = 0;  // Nest levels open
};

}  // namespace ic::chat_template::detail
