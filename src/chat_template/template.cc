#include "chat_template/template.hh"

#include "chat_template/builtins.hh"
#include "chat_template/lexer.hh"
#include "chat_template/parser.hh"
#include "chat_template/render.hh"

namespace ic::chat_template {

std::unique_ptr<Template> Template::parse(std::string_view source, std::string& error) {
  auto t = std::unique_ptr<Template>(new Template());
  try {
    t->body_ = chat_template::parse(lex(source));
  } catch (const SyntaxError& e) {
    error = e.what();
    return nullptr;
  } catch (const std::exception& e) {  // std::stoll / stod on an out-of-range literal
    error = std::string("bad literal: ") + e.what();
    return nullptr;
  }
  return t;
}

bool Template::render(const Dict& variables, std::string& out, std::string& error) const {
  return render(variables, out, error, RenderOptions{});
}

bool Template::render(const Dict& variables, std::string& out, std::string& error,
                      const RenderOptions& options) const {
  // Variables first: a lookup takes the first match, so they shadow globals.
  Dict scope = variables;
  for (auto& global : make_globals()) scope.push_back(std::move(global));
  out.clear();
  try {
    detail::Renderer(std::move(scope), out, options).run(body_);
  } catch (const RenderError& e) {
    error = e.what();
    return false;
  } catch (const std::exception& e) {
    // A value of the wrong kind where a builtin reads it directly (range()
    // of a string: std::bad_variant_access): the variables of a prompt
    // template come from the caller, so this is their error, not a crash.
    out.clear();
    error = std::string("render error: ") + e.what();
    return false;
  }
  return true;
}

}  // namespace ic::chat_template
