#pragma once
// Parses the lexer's tokens into statements. Throws SyntaxError, naming the
// line, for anything outside the subset (docs/prompt-text.md "Chat
// template"): an unknown statement, filter or test fails the parse, so the
// model fails to load instead of rendering wrongly.

#include <vector>

#include "chat_template/ast.hh"
#include "chat_template/lexer.hh"

namespace ic::chat_template {

Body parse(const std::vector<Token>& tokens);

}  // namespace ic::chat_template
