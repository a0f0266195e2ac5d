// Operating the real server binary (issue: run it for real): the drain on
// SIGTERM keeps the admin listeners answering, SIGHUP reloads the policy file
// and the control token without a restart and never stops the server, and
// the startup line carries what an operator needs, with numbers as numbers.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "admin/http_client.hh"
#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "support/builders.hh"
#include "support/grpc_frame.hh"
#include "support/h2_client.hh"
#include "support/server_process.hh"
#include "support/temp_dir.hh"
#include "support/text.hh"

namespace pb = inferencecache::v1alpha1;
using namespace ic::itest;
using namespace std::chrono_literals;

namespace {

void write_file(const std::string& path, const std::string& content) {
  // Write then rename, as a mounted ConfigMap/Secret update does.
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp, std::ios::binary | std::ios::trunc) << content;
  std::filesystem::rename(tmp, path);
}

// The first JSON log line whose "msg" is `msg`.
nlohmann::json log_event(ServerProcess& server, const std::string& msg) {
  std::istringstream lines(server.log());
  for (std::string line; std::getline(lines, line);) {
    const auto event = nlohmann::json::parse(line, nullptr, false);
    if (!event.is_discarded() && event.value("msg", "") == msg) return event;
  }
  return nullptr;
}

std::string policy_json(int floor) {
  return R"({"version":7,"policies":[{"namespace":"team-a","routingFloorScore":)" +
         std::to_string(floor) + "}]}";
}

}  // namespace

TEST_CASE("SIGTERM drain: /readyz 503 draining, /healthz and /metrics 200 until gRPC drained") {
  ServerOptions options;
  options.extra_args = {"--threads", "2", "--pin-threads=false", "--insecure-disable-auth"};
  ServerProcess server(options);
  REQUIRE(http_request(server.http_port(), "GET", "/readyz").status == 200);

  // A ReportCacheState stream left open keeps gRPC draining.
  H2Client grpc(server.grpc_port());
  const int32_t stream = grpc.start(method_path("ReportCacheState"),
                                    BodyPlan{frame_message(ic::test::probe_update()), 0, false});
  grpc.flush();
  grpc.run_until([] { return false; }, 50ms);
  server.signal(SIGTERM);
  REQUIRE(grpc.run_until([&] { return grpc.goaway_received(); }, 10s));

  const HttpReply ready = http_request(server.http_port(), "GET", "/readyz");
  CHECK(ready.status == 503);
  CHECK(ready.body == "draining");
  const HttpReply health = http_request(server.http_port(), "GET", "/healthz");
  CHECK(health.status == 200);
  CHECK(health.body == "ok");
  const HttpReply metrics = http_request(server.http_port(), "GET", "/metrics");
  CHECK(metrics.status == 200);
  CHECK(metrics.body.find("\ninferencecache_server_up 0\n") != std::string::npos);
  CHECK(metrics.body.find("grpc_server_started_total{grpc_method=\"ReportCacheState\","
                          "grpc_service=\"inferencecache.v1alpha1.InferenceCache\","
                          "grpc_type=\"client_stream\"} 1\n") != std::string::npos);
  // The control listener answers too (the last /snapshot before exit).
  CHECK(http_request(server.snapshot_port(), "GET", "/snapshot").status == 200);
  // New gRPC connections are refused while the admin side answers.
  CHECK_THROWS(H2Client(server.grpc_port()));
  CHECK(server.running());

  // The stream completes; gRPC has drained, the server exits 0.
  grpc.send(stream, frame_message(ic::test::probe_update()), true);
  REQUIRE(grpc.run_until([&] { return grpc.response(stream).done(); }, 10s));
  CHECK(grpc.response(stream).grpc_status() == kOk);
  CHECK(server.wait_exit(15s) == 0);
  const nlohmann::json shutting = log_event(server, "shutting down");
  REQUIRE(shutting.is_object());
  CHECK(shutting["signal"] == "SIGTERM");
  CHECK(shutting["grace_ms"] == 10000);
  CHECK(shutting["grpc_connections"] == 1);
  CHECK(log_event(server, "stopped")["exit_code"] == 0);
}

TEST_CASE("startup line: version, build, addresses, TLS, auth mode, threads as JSON numbers") {
  ic::test::TempDir dir("ic-ops");
  write_file(dir.file("token"), "t0\n");
  ServerOptions options;
  options.extra_args = {"--threads", "2", "--pin-threads=false", "--control-token-file",
                        dir.file("token")};
  ServerProcess server(options);
  REQUIRE(server.logged("\"msg\":\"serving\""));
  const nlohmann::json serving = log_event(server, "serving");
  CHECK(serving["version"] == "0.1.0");
  CHECK(serving["commit"].get<std::string>().size() >= 7);
  CHECK(serving["grpc_port"] == server.grpc_port());
  CHECK(serving["http_port"] == server.http_port());
  CHECK(serving["snapshot_port"] == server.snapshot_port());
  CHECK(serving["grpc_address"] == "127.0.0.1:" + std::to_string(server.grpc_port()));
  CHECK(serving["tls"] == false);
  CHECK(serving["auth"] == "bearer token");
  CHECK(serving["threads"] == 2);
  // A token-protected loopback control listener: no warning.
  CHECK(server.log().find("control listener has no auth") == std::string::npos);
  CHECK(server.stop() == 0);
}

TEST_CASE("auth disabled on a non-loopback control address: one warning at startup") {
  ServerOptions options;
  options.extra_args = {"--threads", "1", "--pin-threads=false", "--insecure-disable-auth"};
  options.snapshot_on_all_interfaces = true;
  ServerProcess server(options);
  REQUIRE(server.logged("\"msg\":\"serving\""));
  const nlohmann::json warning =
      log_event(server, "control listener has no auth and is reachable from other hosts");
  REQUIRE(warning.is_object());
  CHECK(warning["level"] == "warn");
  CHECK(warning["snapshot_address"] == "0.0.0.0:" + std::to_string(server.snapshot_port()));
  CHECK(log_event(server, "serving")["auth"] == "disabled");
  CHECK(server.stop() == 0);
}

TEST_CASE("SIGHUP re-reads the policy file and the token file, logs each, never stops") {
  ic::test::TempDir dir("ic-ops");
  write_file(dir.file("token"), "old-token\n");
  write_file(dir.file("policy.json"), policy_json(1));
  ServerOptions options;
  options.extra_args = {"--threads",
                        "2",
                        "--pin-threads=false",
                        "--control-token-file",
                        dir.file("token"),
                        "--policy-file",
                        dir.file("policy.json")};
  ServerProcess server(options);
  const auto snapshot_with = [&](const std::string& token) {
    return http_request(server.snapshot_port(), "GET", "/snapshot", {},
                        "Authorization: Bearer " + token + "\r\n")
        .status;
  };
  CHECK(snapshot_with("old-token") == 200);

  // A bad policy and an empty token: SIGHUP logs both, keeps the last good.
  write_file(dir.file("policy.json"), R"({"version":7,"policies":[{"namespace":1}]})");
  write_file(dir.file("token"), "\n");
  server.signal(SIGHUP);
  REQUIRE(server.logged("\"msg\":\"policy rejected\""));
  REQUIRE(server.logged("\"msg\":\"control token rejected\""));
  CHECK(server.running());
  const nlohmann::json rejected = log_event(server, "policy rejected");
  CHECK(rejected["source"] == "file");
  CHECK(rejected["kept"] == "last good policy");

  // Good files again: accepted and reloaded; the new token works at once.
  write_file(dir.file("policy.json"), policy_json(2));
  write_file(dir.file("token"), "new-token\n");
  server.signal(SIGHUP);
  REQUIRE(server.logged("\"msg\":\"control token reloaded\""));
  REQUIRE(server.logged("\"msg\":\"reloading\"", 2));
  CHECK(snapshot_with("new-token") == 200);
  CHECK(snapshot_with("old-token") == 403);
  // SIGHUP's forced re-read accepted it (the 1 s poll may log it a second time).
  REQUIRE(server.logged("\"msg\":\"policy accepted\""));
  const nlohmann::json accepted = log_event(server, "policy accepted");
  CHECK(accepted["policies"] == 1);
  CHECK(accepted["quotas"] == 0);
  const HttpReply metrics = http_request(server.http_port(), "GET", "/metrics");
  CHECK(
      metrics.body.find("inferencecache_policy_reloads_total{source=\"file\",result=\"error\"} ") !=
      std::string::npos);

  // A refused control request is logged (rate-limited), with the reason.
  CHECK(snapshot_with("wrong") == 403);
  REQUIRE(server.logged("\"msg\":\"control request refused\""));
  const nlohmann::json refused = log_event(server, "control request refused");
  CHECK(refused["status"] == 403);
  CHECK(refused["reason"] == "invalid bearer token");
  CHECK(refused["path"] == "/snapshot");

  // Many SIGHUPs in a row: still serving.
  for (int i = 0; i < 5; ++i) server.signal(SIGHUP);
  REQUIRE(server.logged("\"msg\":\"reloading\"", 3));
  CHECK(health_serving(server.grpc_port(), 10s));
  CHECK(server.stop() == 0);
}

TEST_CASE("limits and debug: message limit and refused call logged, connections at debug") {
  ServerOptions options;
  options.extra_args = {"--threads",   "1",     "--pin-threads=false", "--insecure-disable-auth",
                        "--log-level", "debug", "--max-message-bytes", "64"};
  ServerProcess server(options);
  H2Client grpc(server.grpc_port());
  pb::LookupRouteRequest req;
  req.set_model_id(std::string(200, 'm'));
  const int32_t id = grpc.start(method_path("LookupRoute"), BodyPlan{frame_message(req), 0, true});
  grpc.flush();
  REQUIRE(grpc.run_until([&] { return grpc.response(id).done(); }, 10s));
  CHECK(grpc.response(id).grpc_status() == 8);  // RESOURCE_EXHAUSTED
  REQUIRE(server.logged("\"msg\":\"message limit hit: call refused\""));
  const nlohmann::json limit = log_event(server, "message limit hit: call refused");
  CHECK(limit["max_message_bytes"] == 64);
  CHECK(limit["method"] == "/inferencecache.v1alpha1.InferenceCache/LookupRoute");
  REQUIRE(server.logged("\"msg\":\"call failed\""));
  CHECK(log_event(server, "call failed")["grpc_code"] == "RESOURCE_EXHAUSTED");
  REQUIRE(server.logged("\"msg\":\"connection accepted\""));
  const nlohmann::json accepted = log_event(server, "connection accepted");
  CHECK(accepted["level"] == "debug");
  CHECK(accepted["listener"] == "grpc");
  CHECK(accepted["peer"].get<std::string>().rfind("127.0.0.1:", 0) == 0);

  // The refused call in the go-grpc-prometheus families, and the process collector.
  const std::string metrics = http_request(server.http_port(), "GET", "/metrics").body;
  const std::string labels =
      "grpc_method=\"LookupRoute\",grpc_service=\"inferencecache.v1alpha1.InferenceCache\","
      "grpc_type=\"unary\"";
  CHECK(metrics.find("\ngrpc_server_started_total{" + labels + "} 1\n") != std::string::npos);
  CHECK(metrics.find("\ngrpc_server_handled_total{grpc_code=\"ResourceExhausted\"," + labels +
                     "} 1\n") != std::string::npos);
  CHECK(metrics.find("\ngrpc_server_handled_total{grpc_code=\"OK\"," + labels + "} 0\n") !=
        std::string::npos);
  CHECK(metrics.find("\ngrpc_server_handling_seconds_count{" + labels + "} 1\n") !=
        std::string::npos);
  // Never-called methods are there at 0 from the first scrape.
  CHECK(metrics.find("\ngrpc_server_started_total{grpc_method=\"GetCacheState\"") !=
        std::string::npos);
  for (const char* family : {"\nprocess_cpu_seconds_total ", "\nprocess_open_fds ",
                             "\nprocess_max_fds ", "\nprocess_resident_memory_bytes ",
                             "\nprocess_virtual_memory_bytes ", "\nprocess_start_time_seconds "}) {
    CAPTURE(family);
    CHECK(metrics.find(family) != std::string::npos);
  }
  CHECK(metrics.find("inferencecache_build_info{version=\"0.1.0\",git_commit=\"") !=
        std::string::npos);
  CHECK(server.stop() == 0);
  CHECK(server.logged("\"msg\":\"connection closed\""));
}

TEST_CASE("connection limit: refused connections are logged once per interval") {
  ServerOptions options;
  options.extra_args = {"--threads",         "1", "--pin-threads=false", "--insecure-disable-auth",
                        "--max-connections", "1"};
  ServerProcess server(options);
  // The one allowed connection, then more until one is refused (the health
  // check's connection may still be counted for a moment).
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 20 && !server.logged("connection limit reached", 1, 200ms); ++i) {
    held.push_back(std::make_unique<RawConnection>(server.http_port()));
  }
  const nlohmann::json refused = log_event(server, "connection limit reached: connection refused");
  REQUIRE(refused.is_object());
  CHECK(refused["listener"] == "http");
  CHECK(refused["max_connections"] == 1);
  held.clear();
  CHECK(server.stop() == 0);
}
