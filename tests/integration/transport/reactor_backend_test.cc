// The server where io_uring is refused (docs/architecture.md "Reactor
// backends", docs/admin.md "Reactor backend"): under a seccomp filter that
// fails io_uring_setup/enter/register with EPERM (support/no_io_uring.py,
// what containerd's and Docker's default profiles do) it runs on epoll with
// one warning, answers LookupRoute, a client stream, a server stream and the
// admin endpoints, and exits 0 on SIGTERM; `--reactor-backend epoll` does the
// same without the filter and without the warning; `--reactor-backend
// io_uring` under the filter is one error line and exit 1, not an abort.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "admin/http_client.hh"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "support/builders.hh"
#include "support/grpc_channel.hh"
#include "support/server_process.hh"

namespace pb = inferencecache::v1alpha1;
using namespace ic::itest;
using namespace std::chrono_literals;

namespace {

// support/no_io_uring.py (IC_NO_IO_URING, set by meson).
std::string no_io_uring() {
  const char* p = std::getenv("IC_NO_IO_URING");
  REQUIRE_MESSAGE(p != nullptr, "IC_NO_IO_URING is not set (meson sets it)");
  return p;
}

// Occurrences of `needle` in `text`.
int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

ServerOptions options(std::vector<std::string> wrapper, std::vector<std::string> flags) {
  ServerOptions o;
  o.wrapper = std::move(wrapper);
  o.extra_args = {"--threads", "2", "--insecure-disable-auth"};
  o.extra_args.insert(o.extra_args.end(), flags.begin(), flags.end());
  return o;
}

// LookupRoute after ReportCacheState (a client stream): the exact 128-token
// prefix r4 reported is matched by r4.
void lookup_after_report(pb::InferenceCache::Stub& stub) {
  pb::CacheStateUpdate update =
      ic::test::scoped_update("t", "m", "vllm", "r4", ic::test::hour_from_now_us());
  update.add_prefixes()->set_prefix_hash(ic::test::block_hash(100));
  update.mutable_prefixes(0)->set_token_count(128);
  pb::Ack ack;
  const grpc::Status reported = report_cache_state(stub, {update}, &ack);
  REQUIRE_MESSAGE(reported.ok(), reported.error_message());
  CHECK(ack.accepted());

  pb::LookupRouteRequest query = ic::test::scoped_lookup("t", "m", "vllm");
  query.set_prefix_hash(ic::test::block_hash(100));
  query.set_prefix_token_count(128);
  pb::LookupRouteResponse answer;
  const grpc::Status looked =
      call_unary(stub, &pb::InferenceCache::Stub::LookupRoute, query, &answer);
  REQUIRE_MESSAGE(looked.ok(), looked.error_message());
  CHECK(answer.reason_code() == "PREFIX_MATCH");
  REQUIRE(answer.replica_scores_size() == 1);
  CHECK(answer.replica_scores(0).replica_id() == "r4");
  CHECK(answer.replica_scores(0).matched_tokens() == 128);
}

// The admin endpoints; /metrics names the backend in build_info.
void admin_endpoints(const ServerProcess& server) {
  CHECK(http_request(server.http_port(), "GET", "/healthz").status == 200);
  CHECK(http_request(server.http_port(), "GET", "/readyz").status == 200);
  const HttpReply metrics = http_request(server.http_port(), "GET", "/metrics");
  CHECK(metrics.status == 200);
  CHECK(metrics.body.find(",reactor_backend=\"epoll\"} 1\n") != std::string::npos);
  const HttpReply snapshot = http_request(server.snapshot_port(), "GET", "/snapshot");
  CHECK(snapshot.status == 200);
  CHECK(snapshot.body.find("\"r4\"") != std::string::npos);
}

// Everything a served epoll server must do, then SIGTERM: a Health/Watch
// stream sees SERVING then NOT_SERVING, and the exit status is 0.
void serve_on_epoll(GrpcServed& served) {
  CHECK(served.server.logged("\"msg\":\"serving\"", 1, 10s));
  CHECK(count(served.server.log(), "\"reactor_backend\":\"epoll\"") == 1);
  lookup_after_report(*served.stub);
  admin_endpoints(served.server);
  auto health = grpc::health::v1::Health::NewStub(served.channel);
  HealthWatch watch(*health);
  CHECK(watch.next() == grpc::health::v1::HealthCheckResponse::SERVING);
  served.server.signal(SIGTERM);
  CHECK(watch.next() == grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  CHECK(served.stop() == 0);
}

// Runs the server to its exit with `wrapper` and `flags`; its exit status
// and everything it wrote.
std::pair<int, std::string> run_to_exit(std::vector<std::string> wrapper,
                                        std::vector<std::string> flags) {
  const auto log_path = std::filesystem::temp_directory_path() /
                        ("ic-backend-" + std::to_string(::getpid()) + ".log");
  const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  std::vector<std::string> args = std::move(wrapper);
  args.push_back(server_binary().string());
  for (const char* a : {"--grpc-bind-address", "127.0.0.1:0", "--http-bind-address", "127.0.0.1:0",
                        "--snapshot-bind-address", "127.0.0.1:0"}) {
    args.emplace_back(a);
  }
  args.insert(args.end(), flags.begin(), flags.end());
  const pid_t pid = spawn_logged(std::move(args), fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::ifstream in(log_path);
  std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(log_path);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), log};
}

}  // namespace

TEST_CASE("io_uring refused by seccomp: epoll, one warning, served, exit 0 on SIGTERM") {
  // auto named (the default), so `meson test --setup epoll` does not choose for it.
  GrpcServed served(options({no_io_uring()}, {"--reactor-backend", "auto"}));
  const std::string log = served.server.log();
  CHECK(count(log, "\"level\":\"warn\"") == 1);
  CHECK(count(log, "\"msg\":\"io_uring refused: running on epoll\"") == 1);
  CHECK(log.find("\"cause\":\"io_uring_setup: Operation not permitted") != std::string::npos);
  CHECK(log.find("io_uring_setup, io_uring_enter and io_uring_register") != std::string::npos);
  serve_on_epoll(served);
}

TEST_CASE("--reactor-backend epoll: the same, without the warning") {
  GrpcServed served(options({}, {"--reactor-backend", "epoll"}));
  CHECK(count(served.server.log(), "io_uring refused") == 0);
  serve_on_epoll(served);
}

TEST_CASE("--reactor-backend io_uring refused by seccomp: one error line, exit 1") {
  const auto [code, log] =
      run_to_exit({no_io_uring()}, {"--threads", "2", "--reactor-backend", "io_uring"});
  CHECK(code == 1);
  CHECK(count(log, "\n") == 1);
  CHECK(log.rfind("{\"ts\":\"", 0) == 0);
  CHECK(log.find("\"level\":\"error\",\"msg\":\"reactors not started\","
                 "\"reactor_backend\":\"io_uring\",\"error\":\"io_uring_setup: Operation not "
                 "permitted") != std::string::npos);
  CHECK(log.find("\"hint\":\"allow the io_uring_setup, io_uring_enter and io_uring_register") !=
        std::string::npos);
}
