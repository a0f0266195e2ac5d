// A server joining a replicated group (docs/replication.md "Readiness",
// "Policy", "Snapshots"), with a real nats-server: /readyz says ready only
// once the stream is applied up to its last record at the first contact;
// the policy outlives the stream's age window; a server with an empty state
// directory loads the snapshot another server published. Every wait polls
// with a generous deadline; nothing asserts timing.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "fixture.hh"
#include "nats_admin.hh"
#include "nats_process.hh"

using namespace ic::rtest;
using namespace std::chrono_literals;

namespace {

constexpr const char* kPolicy =
    R"({"version":7,"policies":[{"namespace":"tenant-0","routingFloorScore":1e9}]})";
constexpr auto kAgeWindow = 2s;  // MaxAge of the changes stream in these tests

std::string readyz(Served& s) {
  const auto r = ic::itest::http_request(s.server.http_port(), "GET", "/readyz");
  return std::to_string(r.status) + " " + r.body;
}

TEST_CASE("ready only once the stream is applied up to its last record at the first contact") {
  TempDir dir;
  ic::itest::NatsProcess nats(dir.file(""));
  Served a(nats.url(), "");
  constexpr int kTenants = 200;
  for (int t = 0; t < kTenants; t += 20) REQUIRE(a.report(workload(t, 20, future_us())).ok());
  REQUIRE(eventually(
      [&] { return a.metric("inferencecache_replication_applied_total") == 2 * kTenants; }));
  // Sequences count stream messages (batches of records).
  const double last =
      static_cast<double>(ic::itest::stream_last_sequence(nats.url(), "INFERENCECACHE"));
  // The gauge follows the applied records within one turn of the replication thread.
  REQUIRE(eventually(
      [&] { return a.metric("inferencecache_replication_last_applied_sequence") == last; }));
  const std::vector<std::string> want = answers(a, kTenants);

  // B is ready (gRPC health SERVING, waited for by ServerProcess) only after
  // the stream's last message: its answers agree at once, without polling.
  Served b(nats.url(), "");
  CHECK(b.metric("inferencecache_replication_catch_up_target_sequence") == last);
  CHECK(b.metric("inferencecache_replication_caught_up") == 1);
  CHECK(b.metric("inferencecache_replication_last_applied_sequence") == last);
  CHECK(b.metric("inferencecache_replication_applied_total") == 2 * kTenants);
  CHECK(answers(b, kTenants) == want);
  CHECK(readyz(b) == "200 ok\nreplication: connected, stream INFERENCECACHE applied through " +
                         std::to_string(static_cast<int>(last)) +
                         ", lag 0 records, 0 changes to publish, 0 dropped");

  // NATS away at C's start: not ready, the reason in /readyz; ready once
  // NATS is back and the stream applied.
  nats.stop();
  Served c(nats.url(), "", {"--nats-startup-wait", "10m"}, "replication starting");
  CHECK(eventually([&] {
    return readyz(c) ==
           "503 not ready\nreplication: NATS unreachable, serving from local state, waiting for "
           "the stream (at most 600 s), stream INFERENCECACHE applied through 0, lag 0 records, 0 "
           "changes to publish, 0 dropped";
  }));
  CHECK(c.metric("inferencecache_replication_caught_up") == 0);
  CHECK(c.metric("inferencecache_replication_catch_up_target_sequence") == 0);
  nats.start();
  CHECK(eventually([&] { return readyz(c).rfind("200 ok\n", 0) == 0; }));
  CHECK(c.metric("inferencecache_replication_catch_up_target_sequence") == last);
  CHECK(answers(c, kTenants) == want);
  CHECK(c.server.log().find("replication: caught up") != std::string::npos);
  stop_all({&a, &b, &c});
}

TEST_CASE("NATS never reached within --nats-startup-wait: ready from local state, said so") {
  TempDir dir;
  ic::itest::NatsProcess nats(dir.file(""));
  nats.stop();
  Served a(nats.url(), "", {"--nats-startup-wait", "1s"});
  CHECK(readyz(a).rfind("200 ok\nreplication: NATS unreachable, serving from local state, stream",
                        0) == 0);
  CHECK(a.metric("inferencecache_replication_caught_up") == 1);
  CHECK(a.server.log().find("stream not reached; ready from local state") != std::string::npos);
  CHECK(a.server.stop() == 0);
}

bool has_match(const std::string& answer) {
  return answer.find("PREFIX_MATCH") != std::string::npos;
}

// Polls until every record has aged out of the changes stream.
bool aged_out(ic::itest::NatsProcess& nats) {
  return eventually([&] { return ic::itest::stream_messages(nats.url(), "INFERENCECACHE") == 0; });
}

TEST_CASE("the policy outlives the stream's age window: a fresh server still applies it") {
  TempDir dir;
  ic::itest::NatsProcess nats(dir.file(""));
  ic::itest::create_changes_stream(nats.url(), "INFERENCECACHE", kAgeWindow);
  Served a(nats.url(), "");
  REQUIRE(ic::itest::http_request(a.server.snapshot_port(), "POST", "/policy", kPolicy).status ==
          204);
  REQUIRE(eventually(
      [&] { return a.metric("inferencecache_replication_last_applied_sequence") == 1; }));
  REQUIRE(aged_out(nats));

  // B has neither a state file nor the policy's record: only the kept policy.
  Served b(nats.url(), "");
  REQUIRE(b.report(workload(0, 2, future_us())).ok());
  const std::vector<std::string> got = answers(b, 2);
  CHECK_FALSE(has_match(got[0]));  // tenant-0: routingFloorScore 1e9
  CHECK(has_match(got[1]));
  CHECK(b.server.log().find("replication: kept policy installed") != std::string::npos);
  CHECK(same_answers(a, b, 2));
  stop_all({&a, &b});
}

TEST_CASE("a server with an empty state directory loads the snapshot another server published") {
  TempDir dir, empty;
  ic::itest::NatsProcess nats(dir.file(""));
  ic::itest::create_changes_stream(nats.url(), "INFERENCECACHE", kAgeWindow);
  Served a(nats.url(), dir.file("a.state"), {"--nats-snapshot-interval", "500ms"});
  REQUIRE(ic::itest::http_request(a.server.snapshot_port(), "POST", "/policy", kPolicy).status ==
          204);
  REQUIRE(a.report(workload(0, 8, future_us())).ok());
  const std::vector<std::string> want = answers(a, 9);
  REQUIRE_FALSE(has_match(want[0]));
  REQUIRE(has_match(want[1]));
  // 1 policy + 16 updates: a snapshot covering all of them, then the age window.
  REQUIRE(eventually([&] { return a.metric("inferencecache_replication_published_total") == 17; }));
  const double last =
      static_cast<double>(ic::itest::stream_last_sequence(nats.url(), "INFERENCECACHE"));
  REQUIRE(eventually(
      [&] { return a.metric("inferencecache_replication_snapshot_published_sequence") == last; }));
  REQUIRE(aged_out(nats));

  Served c(nats.url(), empty.file("c.state"));
  CHECK(c.metric("inferencecache_replication_snapshot_loaded_sequence") == last);
  CHECK(answers(c, 9) == want);  // ready means loaded: no polling
  CHECK(c.server.log().find("replication: snapshot loaded") != std::string::npos);
  CHECK(c.metric("inferencecache_replication_snapshots_published_total") == 0);
  CHECK(a.metric("inferencecache_replication_snapshot_failures_total") == 0);
  stop_all({&a, &c});
}

}  // namespace
