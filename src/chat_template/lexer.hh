#pragma once
// Jinja2 lexer for chat templates, with the environment transformers uses:
// trim_blocks and lstrip_blocks on, keep_trailing_newline off, "-" whitespace
// control on every tag, newlines of template text normalized to "\n".

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ic::chat_template {

// A template that does not lex or parse: the message names the line.
class SyntaxError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Token {
  enum Type {
    kText,        // template text (value: the text)
    kVarBegin,    // {{
    kVarEnd,      // }}
    kBlockBegin,  // {%
    kBlockEnd,    // %}
    kName,        // identifier or keyword
    kString,      // string literal (value: unescaped)
    kInt,
    kFloat,
    kOp,  // operator or punctuation (value: its spelling)
    kEof,
  };
  Type type;
  std::string value;
  int line;
};

// The tokens of `source`; throws SyntaxError (unterminated tag or string,
// unexpected character).
std::vector<Token> lex(std::string_view source);

}  // namespace ic::chat_template
