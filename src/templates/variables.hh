#pragma once
// A request's string variables as template values (docs/templates.md
// "Variables"): every declared variable given once, nothing undeclared, each
// value parsed by its declared type.

#include <span>
#include <string>

#include "chat_template/value.hh"
#include "templates/render.hh"
#include "templates/template_set.hh"

namespace ic::templates {

// Fills `out` (declaration order) from `given`. False + `error` naming the
// variable ("variable \"n\": not an integer", "missing variable \"today\"",
// "undeclared variable \"x\"").
bool typed_variables(const PromptTemplate& t, std::span<const VariableView> given,
                     chat_template::Dict& out, std::string& error);

}  // namespace ic::templates
