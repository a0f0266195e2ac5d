#pragma once
// Syntax tree of the Jinja subset (built by parser.cc, run by render.cc).

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat_template/value.hh"

namespace ic::chat_template {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum Kind {
    kLiteral,  // literal
    kName,     // name
    kList,     // [args…]
    kDict,     // {args[2i]: args[2i+1]}
    kAttr,     // args[0].name
    kIndex,    // args[0][args[1]]
    kSlice,    // args[0][args[1]:args[2]:args[3]] (null parts allowed)
    kCall,     // args[0](args[1…], kwargs)
    kFilter,   // args[0] | name(args[1…], kwargs)
    kTest,     // args[0] is [not] name(args[1…])
    kUnary,    // name ∈ {"-", "+", "not"} args[0]
    kBinary,   // args[0] name args[1]: + - * / // % ** ~ == != < <= > >= in "not in";
               // "+" is a chain: args[0] + args[1] + … (two or more), added left to right
    kAnd,
    kOr,
    kCond,  // args[1] if args[0] else args[2] (args[2] may be null)
  };
  // The operator of a kUnary / kBinary, resolved from `name` by the parser so
  // that the render switches instead of comparing strings.
  enum Op : std::uint8_t {
    kNoOp,
    kAdd,
    kSub,
    kMul,
    kDiv,
    kFloorDiv,
    kMod,
    kPow,
    kConcat,
    kEq,
    kNe,
    kLt,
    kLe,
    kGt,
    kGe,
    kIn,
    kNotIn,
    kNot,  // unary
    kPos,  // unary +
    kNeg,  // unary -
  };
  Kind kind;
  Op op = kNoOp;
  int line = 0;
  Value literal;
  std::string name;     // kBinary / kUnary: the operator as written (error messages)
  bool negate = false;  // kTest: "is not"
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum Kind {
    kText,    // text
    kOutput,  // {{ expr }}
    kIf,      // branches, else_body
    kFor,     // targets in expr [if cond]: body, else_body
    kSet,     // targets / attr = expr, or {% set name %}body{% endset %}
    kMacro,   // name(params): body
    kBreak,
    kContinue,
  };
  Kind kind;
  int line = 0;
  std::string text;                                     // kText
  ExprPtr expr;                                         // kOutput, kFor iterable, kSet value
  ExprPtr cond;                                         // kFor filter
  std::vector<std::pair<ExprPtr, Body>> branches;       // kIf
  Body body, else_body;                                 // kFor, kIf (else), kSet block, kMacro
  std::vector<std::string> targets;                     // kFor, kSet
  std::string attr;                                     // kSet: targets[0].attr = …
  std::string name;                                     // kMacro
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro (default may be null)
};

}  // namespace ic::chat_template
