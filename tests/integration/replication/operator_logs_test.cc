// What an operator sees of replication (docs/replication.md "Readiness", "When NATS is slow or
// away"), with a real nats-server: a NATS without JetStream is named in /readyz and logged with
// backoff; a connection lost and regained, and a policy arriving through the stream, are each
// one log line. Every wait polls with a generous deadline; nothing asserts timing.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>

#include "fixture.hh"
#include "nats_admin.hh"
#include "nats_process.hh"

using namespace ic::rtest;
using namespace std::chrono_literals;

namespace {

std::string readyz(Served& s) {
  const auto r = ic::itest::http_request(s.server.http_port(), "GET", "/readyz");
  return std::to_string(r.status) + " " + r.body;
}

// Times `text` occurs in the server's log so far.
std::size_t count_in_log(Served& s, const std::string& text) {
  const std::string log = s.server.log();
  std::size_t n = 0;
  for (auto at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++n;
  return n;
}

TEST_CASE("NATS without JetStream: /readyz says so, and the log once, not every retry") {
  TempDir dir;
  ic::itest::NatsProcess nats(dir.file(""), "", /*jetstream=*/false);
  Served a(nats.url(), "", {"--nats-startup-wait", "1s"});
  const std::string no_js =
      "NATS reached, but JetStream is not enabled on it (start nats-server with -js, "
      "docs/replication.md)";
  CHECK(eventually([&] {
    return readyz(a) == "200 ok\nreplication: " + no_js +
                            ", serving from local state, stream INFERENCECACHE applied through 0, "
                            "lag 0 records, 0 changes to publish, 0 dropped";
  }));
  REQUIRE(count_in_log(a, no_js) == 1);
  // Set-up is retried 250 ms, 500 ms, 1 s, 2 s ... apart; the same problem is logged again only
  // 10 s after its first line.
  std::this_thread::sleep_for(3s);
  CHECK(count_in_log(a, no_js) == 1);
  CHECK(count_in_log(a, "replication: stream not available") == 0);
  CHECK(a.server.stop() == 0);
}

TEST_CASE(
    "a stream JetStream refuses for good: its line once, then again only after the 10 s "
    "backoff, counting the attempts in between") {
  TempDir dir;
  ic::itest::NatsProcess nats(dir.file(""));
  // Another stream holds the subject: creating INFERENCECACHE fails on every attempt.
  ic::itest::create_changes_stream(nats.url(), "SQUATTER", std::chrono::hours(1),
                                   "INFERENCECACHE.changes");
  Served a(nats.url(), "", {"--nats-startup-wait", "1s"});
  const std::string line = "\"msg\":\"replication: stream not available\"";
  REQUIRE(eventually([&] { return count_in_log(a, line) == 1; }));
  CHECK(count_in_log(a, line + ",\"stream\":\"INFERENCECACHE\"") == 1);
  // Set-up is retried 250 ms, 500 ms, 1 s, 2 s, 4 s, 8 s apart: five attempts within the 10 s
  // backoff are swallowed, the one at 15.75 s logs again and counts them; the next
  // line is due 20 s after that.
  std::this_thread::sleep_for(3s);
  CHECK(count_in_log(a, line) == 1);  // without the backoff: one line per attempt
  REQUIRE(eventually([&] { return count_in_log(a, line) == 2; }, 40s));
  CHECK(count_in_log(a, line) == 2);
  CHECK(count_in_log(a, "\"suppressed\":0}") == 1);
  CHECK(count_in_log(a, "\"suppressed\":5}") == 1);
  CHECK(a.server.stop() == 0);
}

TEST_CASE("NATS lost and regained, a policy through the stream: one log line each") {
  TempDir dir;
  ic::itest::NatsProcess nats(dir.file(""));
  Served a(nats.url(), ""), b(nats.url(), "");
  CHECK(count_in_log(b, "\"msg\":\"replication: NATS connected\"") == 1);
  const auto put = ic::itest::http_request(a.server.snapshot_port(), "PUT", "/policy",
                                           R"({"version":7,"policies":[{"namespace":"t"}]})");
  REQUIRE(put.status == 204);
  CHECK(eventually([&] {
    return count_in_log(b, "\"msg\":\"policy accepted\",\"source\":\"replication\"") == 1;
  }));
  nats.stop();
  CHECK(eventually([&] {
    return count_in_log(b,
                        "\"msg\":\"replication: NATS connection lost; reconnecting, serving "
                        "from local state\"") == 1;
  }));
  nats.start();
  CHECK(
      eventually([&] { return count_in_log(b, "\"msg\":\"replication: NATS connected\"") == 2; }));
  CHECK(eventually([&] { return readyz(b).rfind("200 ok\nreplication: connected,", 0) == 0; }));
  stop_all({&a, &b});
}

}  // namespace
