#pragma once
// The tree-walking interpreter behind Template::render (internal).

#include <string>

#include "chat_template/ast.hh"
#include "chat_template/template.hh"
#include "chat_template/value.hh"

namespace ic::chat_template::detail {

class Renderer {
 public:
  // `scope` (globals and variables) is the outermost frame.
  Renderer(Dict scope, std::string& out, const RenderOptions& options = {});
  // Runs `body`; throws RenderError.
  void run(const Body& body);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  Flow exec(const Body& body);
  Flow exec(const Stmt& s);
  Flow exec_for(const Stmt& s);
  void exec_set(const Stmt& s);
  Value make_macro(const Stmt& s);
  Value eval(const Expr& e);
  Value eval_binary(const Expr& e);
  Value eval_sum(const Expr& e);
  // Adds the + chain `e` left to right. While its operands are strings they
  // are collected in `run` (`size`: their bytes, bounded as + bounds what it
  // builds) and true returned; from the first other operand on the chain is
  // added one "+" at a time into `folded`, false returned.
  bool sum_strings(const Expr& e, std::vector<Value>& run, std::size_t& size, Value& folded);
  Value fold_sum(Value acc, const Expr& e, std::size_t i);
  static Value join(const std::vector<Value>& strings, std::size_t size);
  Value eval_index(const Value& object, const Value& key);
  Value eval_slice(const Expr& e);
  Value eval_call(const Expr& e);
  Value lookup(const std::string& name);
  void assign(const std::string& name, Value value);
  // Throws RenderError when `size` more bytes would pass the output limit.
  void make_room(std::size_t size) const;
  void emit(const std::string& text);
  // Writes the value of `{{ e }}` (str() of it) to the output.
  void output(const Expr& e);
  void output(const Value& v);

  std::vector<Dict> frames_;
  std::string* out_;
  std::string* root_;  // the final output (out_ is a macro's while it runs)
  std::size_t max_output_bytes_;
  RenderProbe* probe_;
  std::size_t watched_reads_ = 0;
  std::size_t iterations_ = 0;
  int macro_depth_ = 0;
  std::size_t macro_calls_ = 0;  // this render's, ≤ kMaxMacroCalls
};

}  // namespace ic::chat_template::detail
