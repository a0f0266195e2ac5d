// The admin listeners of the real inferencecache-server on loopback, driven by
// raw HTTP/1.1 sockets, promtool and grpc++ (docs/admin.md, docs/policy.md):
// metric names/types/labels and exact counts after traffic, /snapshot after a
// known ingest, /policy statuses and a pushed policy reaching every core, and
// malformed or slow HTTP clients never holding up the gRPC port.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "http_client.hh"
#include "index/partition.hh"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "support/auth_metrics.hh"
#include "support/golden.hh"
#include "support/grpc_channel.hh"
#include "support/server_process.hh"
#include "support/temp_dir.hh"
#include "support/text.hh"

namespace pb = inferencecache::v1alpha1;
using ic::itest::deadline_in;
using ic::itest::http_request;
using ic::itest::HttpReply;
using ic::itest::numbered;
using ic::itest::RawConnection;
using namespace std::chrono_literals;

namespace {

constexpr unsigned kThreads = 2;
constexpr char kToken[] = "integration-token";
constexpr char kAuth[] = "Authorization: Bearer integration-token\r\n";

// A temp dir holding the control token file; removed at scope exit.
struct TokenFile {
  ic::test::TempDir dir{"ic-admin-itest"};
  std::string path = dir.file("token");
  TokenFile() { std::ofstream(path) << kToken << "\n"; }
};

// One token file for the whole test process (every server reads the same token).
const TokenFile token;

ic::itest::ServerOptions options_for_token() {
  ic::itest::ServerOptions o;
  o.extra_args = {"--threads", std::to_string(kThreads), "--control-token-file", token.path};
  return o;
}

struct Served : ic::itest::GrpcServed {
  Served() : GrpcServed(options_for_token()) {}

  void ingest(const std::vector<pb::CacheStateUpdate>& updates) {
    pb::Ack ack;
    const grpc::Status st = ic::itest::report_cache_state(*stub, updates, &ack);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    REQUIRE(ack.accepted());
  }

  pb::LookupRouteResponse lookup(const pb::LookupRouteRequest& req) {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(10s));
    pb::LookupRouteResponse resp;
    const grpc::Status st = stub->LookupRoute(&ctx, req, &resp);
    CAPTURE(st.error_code());
    CAPTURE(st.error_message());
    REQUIRE(st.ok());
    return resp;
  }

  std::string scrape() {
    HttpReply r = http_request(server.http_port(), "GET", "/metrics");
    REQUIRE(r.status == 200);
    return r.body;
  }
};

pb::CacheStateUpdate update(std::string tenant, std::string replica, std::string model,
                            std::int64_t timestamp_us,
                            std::vector<std::pair<std::string, int>> prefixes) {
  pb::CacheStateUpdate u;
  u.set_tenant_id(std::move(tenant));
  u.set_replica_id(std::move(replica));
  u.set_model_id(std::move(model));
  u.set_hash_scheme("vllm-sha256");
  u.set_timestamp_us(timestamp_us);
  for (auto& [hash, tokens] : prefixes) {
    auto* p = u.add_prefixes();
    p->set_prefix_hash(hash);
    p->set_token_count(tokens);
  }
  return u;
}

pb::LookupRouteRequest exact(std::string tenant, std::string model, std::string hash) {
  pb::LookupRouteRequest r;
  r.set_tenant_id(std::move(tenant));
  r.set_model_id(std::move(model));
  r.set_hash_scheme("vllm-sha256");
  r.set_prefix_hash(std::move(hash));
  return r;
}

// Series line "name{labels}" → value, for every sample of an exposition.
std::map<std::string, double> samples(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t space = line.rfind(' ');
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

double value_of(const std::map<std::string, double>& s, const std::string& series) {
  auto it = s.find(series);
  return it == s.end() ? 0.0 : it->second;
}

std::string calls_series(std::string_view model, std::string_view reason, bool hint) {
  std::string s = "inferencecache_lookup_route_calls_total{model=\"";
  s.append(model).append("\",reason_code=\"").append(reason).append("\",hint_used=\"");
  s.append(hint ? "true" : "false").append("\"}");
  return s;
}

// Runs `promtool check metrics` on `exposition`; returns its exit status.
int promtool_check(const std::string& exposition) {
  char path[] = "/tmp/ic-admin-scrape-XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, exposition.data(), exposition.size()) ==
          static_cast<ssize_t>(exposition.size()));
  ::close(fd);
  std::string cmd = "promtool check metrics < ";
  cmd += path;
  const int rc = std::system(cmd.c_str());
  std::remove(path);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace

TEST_CASE("a scrape after traffic passes promtool with the contract's names, types and counts") {
  Served s;
  const HttpReply health = http_request(s.server.http_port(), "GET", "/healthz");
  CHECK(health.status == 200);
  CHECK(health.body == "ok");
  const HttpReply ready = http_request(s.server.http_port(), "GET", "/readyz");
  CHECK(ready.status == 200);
  CHECK(ready.body == "ok");
  const std::string before = s.scrape();
  // Two tenants on index; lookups with known outcomes.
  s.ingest({update("team-a", "r1", "llama", 0, {{"h-128", 128}}),
            update("team-b", "r2", "qwen", 0, {{"h-256", 256}})});
  for (int i = 0; i < 3; ++i) {
    const auto resp = s.lookup(exact("team-a", "llama", "h-128"));
    REQUIRE(resp.reason_code() == "PREFIX_MATCH");
  }
  for (int i = 0; i < 2; ++i) {
    REQUIRE(s.lookup(exact("nobody", "llama", "h-128")).reason_code() == "UNKNOWN_TENANT");
  }
  REQUIRE(s.lookup(exact("team-a", "mistral", "h-128")).reason_code() == "UNKNOWN_MODEL");
  pb::LookupRouteRequest probe = exact("inferencecache.io/probe", "llama", "h-128");
  REQUIRE(s.lookup(probe).reason_code() == "NO_HINT");
  const std::string after = s.scrape();

  CHECK(promtool_check(after) == 0);
  // Every contract family with its type (docs/admin.md "Metrics").
  for (const char* type_line : {
           "# TYPE inferencecache_server_up gauge\n",
           "# TYPE inferencecache_server_grpc_tls_enabled gauge\n",
           "# TYPE inferencecache_index_entries gauge\n",
           "# TYPE inferencecache_lookup_route_calls_total counter\n",
           "# TYPE inferencecache_lookup_route_latency_seconds histogram\n",
           "# TYPE inferencecache_tenant_evictions_total counter\n",
           "# TYPE inferencecache_index_evictions_total counter\n",
           "# TYPE inferencecache_snapshot_auth_total counter\n",
           "# TYPE inferencecache_policy_auth_total counter\n",
       }) {
    CAPTURE(type_line);
    CHECK(after.find(type_line) != std::string::npos);
  }
  const auto b = samples(before);
  const auto a = samples(after);
  CHECK(value_of(a, "inferencecache_server_up") == 1);
  CHECK(value_of(a, "inferencecache_server_grpc_tls_enabled") == 0);
  CHECK(value_of(a, "inferencecache_index_entries{model=\"llama\"}") == 1);
  CHECK(value_of(a, "inferencecache_index_entries{model=\"qwen\"}") == 1);
  // Exactly one more per call, per (model, reason_code, hint_used).
  auto delta = [&](const std::string& series) { return value_of(a, series) - value_of(b, series); };
  CHECK(delta(calls_series("llama", "PREFIX_MATCH", true)) == 3);
  CHECK(delta(calls_series("llama", "UNKNOWN_TENANT", false)) == 2);
  CHECK(delta(calls_series("mistral", "UNKNOWN_MODEL", false)) == 1);
  CHECK(delta(calls_series("llama", "NO_HINT", false)) == 1);  // the reserved tenant
  double total = 0;
  for (const auto& [series, v] : a) {
    if (series.rfind("inferencecache_lookup_route_calls_total{", 0) == 0) total += v;
  }
  CHECK(total == 7);
  CHECK(delta("inferencecache_lookup_route_latency_seconds_count{model=\"llama\"}") == 6);
  CHECK(delta("inferencecache_lookup_route_latency_seconds_bucket{model=\"llama\",le=\"+Inf\"}") ==
        6);
  CHECK(a.count(
            "inferencecache_lookup_route_latency_seconds_bucket{model=\"llama\",le=\"0.0001\"}") ==
        1);
  CHECK(a.count("inferencecache_lookup_route_latency_seconds_bucket{model=\"llama\",le=\"0.1\"}") ==
        1);
  CHECK(delta("inferencecache_ingest_messages_total") == 2);
  CHECK(a.count("inferencecache_index_evictions_total{algorithm=\"lfu\",reason=\"ttl\"}") == 1);
  CHECK(a.count("inferencecache_policy_auth_total{result=\"forbidden\"}") == 1);
  CHECK(s.stop() == 0);
}

TEST_CASE("/snapshot after a known ingest is the expected JSON document") {
  Served s;
  constexpr std::int64_t kT = 1'900'000'000'000'000;  // 2030-03-17T17:46:40Z
  pb::CacheStateUpdate r1 = update("team-a", "r1", "llama", kT, {{"h1", 16}, {"h2", 32}});
  auto* stats = r1.mutable_stats();
  stats->set_replica_id("r1");
  stats->set_cache_memory_bytes(4096);
  stats->set_hit_rate(0.5f);
  stats->set_pressure(0.25f);
  stats->set_t2_hit_tokens(7);
  stats->set_t2_query_tokens(9);
  stats->set_prefix_cache_hit_tokens(300);
  stats->set_prefix_cache_query_tokens(1200);
  s.ingest({r1, update("team-a", "r2", "llama", kT + 123'456, {{"h1", 16}}),
            update("team-b", "r3", "qwen", kT, {{"h9", 64}}),
            update("inferencecache.io/probe", "p", "llama", kT, {{"h1", 16}})});
  const HttpReply r = http_request(s.server.snapshot_port(), "GET", "/snapshot", {}, kAuth);
  CHECK(r.status == 200);
  CHECK(r.headers.find("Content-Type: application/json\r\n") != std::string::npos);
  // The document tests/admin/snapshot_json_test renders from the same rows.
  // The golden document, and the newline that ends every /snapshot answer.
  CHECK(r.body == ic::itest::read_golden(IC_SNAPSHOT_GOLDEN) + "\n");
  // /metrics carries the engine's counters of every replica with stats
  // (docs/admin.md, predicted vs delivered).
  const std::string metrics = s.scrape();
  CHECK(metrics.find("inferencecache_replica_engine_prefix_cache_hit_tokens_total{model=\"llama\","
                     "replica_id=\"r1\"} 300\n") != std::string::npos);
  CHECK(metrics.find("inferencecache_replica_engine_prefix_cache_query_tokens_total{model="
                     "\"llama\",replica_id=\"r1\"} 1200\n") != std::string::npos);
  CHECK(s.stop() == 0);
}

TEST_CASE(
    "/policy statuses, auth outcomes, and a pushed policy gates the next lookup on every core") {
  Served s;
  // Tenants owned by every core (the partition hash is fixed: index/partition.hh).
  std::vector<std::string> tenants;
  std::set<unsigned> owners;
  for (int i = 0; i < 8; ++i) {
    tenants.push_back(numbered("tenant-", i));
    owners.insert(ic::index::owner_core(tenants.back(), kThreads));
  }
  REQUIRE(owners.size() == kThreads);
  std::vector<pb::CacheStateUpdate> updates;
  for (const auto& t : tenants) updates.push_back(update(t, "r1", "llama", 0, {{"h32", 32}}));
  s.ingest(updates);
  // Default minimumMatchedTokens 64 drops the 32-token match: a miss, and with
  // r1 the only replica known in the scope the work-aware ranking answers
  // NO_HINT (docs/ranking.md "Cost", its Candidates paragraph).
  for (const auto& t : tenants) {
    CAPTURE(t);
    CHECK(s.lookup(exact(t, "llama", "h32")).reason_code() == "NO_HINT");
  }

  const std::uint16_t port = s.server.snapshot_port();
  std::string policy = R"({"version":7,"policies":[)";
  for (std::size_t i = 0; i < tenants.size(); ++i) {
    if (i > 0) policy += ',';
    policy += R"({"namespace":")" + tenants[i] + R"(","minimumMatchedTokens":0})";
  }
  policy += "]}";
  CHECK(http_request(port, "POST", "/policy", policy).status == 401);
  CHECK(http_request(port, "POST", "/policy", policy, "Authorization: Bearer wrong\r\n").status ==
        403);
  CHECK(http_request(port, "POST", "/policy", policy, "Authorization: Basic eDp5\r\n").status ==
        401);
  const HttpReply ok = http_request(port, "POST", "/policy", policy, kAuth);
  CHECK(ok.status == 204);
  CHECK(ok.body.empty());
  for (const auto& t : tenants) {
    CAPTURE(t);
    const auto resp = s.lookup(exact(t, "llama", "h32"));
    CHECK(resp.reason_code() == "PREFIX_MATCH");
    REQUIRE(resp.replica_scores_size() == 1);
    CHECK(resp.replica_scores(0).matched_tokens() == 32);
  }

  const HttpReply bad =
      http_request(port, "PUT", "/policy", R"({"version":7,"bogus":true})", kAuth);
  CHECK(bad.status == 400);
  CHECK(bad.body.find("bogus") != std::string::npos);
  CHECK(http_request(port, "POST", "/policy", R"({"version":2})", kAuth).status == 400);
  CHECK(http_request(port, "POST", "/policy", R"({"version":7}{})", kAuth).status == 400);
  // GET /policy reads back the document in force: the last good one.
  const HttpReply get = http_request(port, "GET", "/policy", {}, kAuth);
  CHECK(get.status == 200);
  CHECK(get.headers.find("Content-Type: application/json\r\n") != std::string::npos);
  CHECK(get.body == policy + "\n");
  CHECK(http_request(port, "GET", "/policy").status == 401);
  // A rejected body keeps the last good policy.
  CHECK(s.lookup(exact(tenants[0], "llama", "h32")).reason_code() == "PREFIX_MATCH");
  // The spec's example replaces everything: our tenants fall back to the default floor.
  CHECK(http_request(port, "PUT", "/policy",
                     R"({"version":7,"policies":[{"namespace":"team-a","routingFloorScore":0}],)"
                     R"("tenants":[{"tenantID":"tenant-a","maxIndexEntries":10}]})",
                     kAuth)
            .status == 204);
  for (const auto& t : tenants) {
    CAPTURE(t);
    CHECK(s.lookup(exact(t, "llama", "h32")).reason_code() == "NO_HINT");
  }

  const std::string scraped = s.scrape();
  CHECK(scraped.find(ic::test::auth_total_lines("policy", 6, 3, 1, 0)) != std::string::npos);
  const auto m = samples(scraped);
  CHECK(value_of(m, "inferencecache_policy_reloads_total{source=\"http\",result=\"ok\"}") == 2);
  CHECK(value_of(m, "inferencecache_policy_reloads_total{source=\"http\",result=\"error\"}") == 3);
  CHECK(s.stop() == 0);
}

TEST_CASE("/snapshot auth outcomes are counted") {
  Served s;
  const std::uint16_t port = s.server.snapshot_port();
  CHECK(http_request(port, "GET", "/snapshot").status == 401);
  CHECK(http_request(port, "GET", "/snapshot", {}, "Authorization: Bearer nope\r\n").status == 403);
  CHECK(http_request(port, "GET", "/snapshot", {}, kAuth).status == 200);
  CHECK(http_request(port, "GET", "/snapshot", {}, kAuth).status == 200);
  CHECK(http_request(port, "GET", "/nothing", {}, kAuth).status == 404);
  CHECK(s.scrape().find(ic::test::auth_total_lines("snapshot", 2, 1, 1, 0)) != std::string::npos);
  CHECK(s.stop() == 0);
}

TEST_CASE("malformed and slow HTTP clients never hold up the gRPC port") {
  Served s;
  s.ingest({update("team-a", "r1", "llama", 0, {{"h-128", 128}})});
  const std::uint16_t http = s.server.http_port();

  // A slow sender: half a request line, then nothing.
  RawConnection slow(http);
  slow.send("GET /metrics HTTP/1.1\r\nHo");
  // Another slow sender on the control port.
  RawConnection slow_control(s.server.snapshot_port());
  slow_control.send("POST /policy HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{");

  // Oversize header section → 431; bad request line → 400; both closed.
  RawConnection big(http);
  big.send("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n");
  const auto big_reply = ic::itest::parse_reply(big.read_until_close(10000));
  REQUIRE(big_reply.has_value());
  CHECK(big_reply->status == 431);
  RawConnection garbage(http);
  garbage.send("THIS IS NOT HTTP\r\n\r\n");
  const auto garbage_reply = ic::itest::parse_reply(garbage.read_until_close(10000));
  REQUIRE(garbage_reply.has_value());
  CHECK(garbage_reply->status == 400);
  CHECK(garbage_reply->body == "bad request line");
  RawConnection chunked(http);
  chunked.send("POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
  const auto chunked_reply = ic::itest::parse_reply(chunked.read_until_close(10000));
  REQUIRE(chunked_reply.has_value());
  CHECK(chunked_reply->status == 411);

  // While the slow clients hold their connections, every core still answers.
  for (int i = 0; i < 20; ++i) {
    CHECK(s.lookup(exact("team-a", "llama", "h-128")).reason_code() == "PREFIX_MATCH");
  }
  CHECK(http_request(http, "GET", "/healthz").status == 200);
  CHECK(http_request(http, "GET", "/metrics").status == 200);

  // The slow senders are answered 408 and closed by the request timer.
  const auto slow_reply = ic::itest::parse_reply(slow.read_until_close(30000));
  REQUIRE(slow_reply.has_value());
  CHECK(slow_reply->status == 408);
  const auto slow_control_reply = ic::itest::parse_reply(slow_control.read_until_close(30000));
  REQUIRE(slow_control_reply.has_value());
  CHECK(slow_control_reply->status == 408);
  CHECK(s.stop() == 0);
}
