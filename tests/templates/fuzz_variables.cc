// libFuzzer target: arbitrary request variables into RenderTemplate's typing
// and render (the part of src/templates any gRPC client reaches): five values
// separated by NUL bytes for a template declaring one variable of each type.
// It must never crash or throw; a refused variable renders nothing; an
// accepted one renders with the volatile offset and the stable cut inside the
// output, the cut at or before the offset.
//
// meson runs it as a regression test over generated inputs
// (fuzz_variables_inputs.cc); a clang build links it with -fsanitize=fuzzer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "templates/stable_prefix.hh"
#include "templates/template_set.hh"
#include "templates/variables.hh"

namespace {

const ic::templates::PromptTemplate& fuzzed() {
  static const auto set = ic::templates::parse_templates_json(
      R"({"version":1,"templates":[{"tenantID":"t","name":"f","model":"m","source":)"
      R"("{{ s }}\n{% for k in j %}{{ k }}={{ j[k] if j is mapping else k }}\n{% endfor %})"
      R"({{ i + 1 }} {{ n * 2 }} {{ 'y' if b else 'n' }} {{ j | tojson }}\n{{ s | length }}",)"
      R"("variables":[{"name":"s","stability":"stable"},)"
      R"({"name":"i","type":"integer","stability":"stable"},)"
      R"({"name":"n","type":"number","stability":"volatile"},)"
      R"({"name":"b","type":"boolean","stability":"stable"},)"
      R"({"name":"j","type":"json","stability":"stable"}]}]})",
      16);
  if (!set.ok()) std::abort();
  return *set.set->find("t", "f");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ic::templates;
  static const char* kNames[] = {"s", "i", "n", "b", "j"};
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<VariableView> given;
  std::size_t at = 0;
  for (const char* name : kNames) {
    if (at > in.size()) break;
    const std::size_t end = std::min(in.find('\0', at), in.size());
    given.emplace_back(name, in.substr(at, end - at));
    at = end + 1;
  }
  const PromptTemplate& t = fuzzed();
  ic::chat_template::Dict values;
  std::string error;
  if (!typed_variables(t, given, values, error)) {
    if (error.empty()) std::abort();
    return 0;
  }
  ic::chat_template::RenderProbe probe;
  probe.watched = t.volatile_names;
  std::string out;
  if (!t.compiled->render(values, out, error, {.max_output_bytes = 1 << 16, .probe = &probe})) {
    if (error.empty()) std::abort();
    return 0;
  }
  const std::size_t offset = std::min(probe.first_read, out.size());
  if (probe.first_read == std::string::npos) std::abort();  // n is volatile and always read
  if (stable_cut(out, offset) > offset) std::abort();
  if (probe.watched_output_bytes > out.size() - offset) std::abort();
  return 0;
}
