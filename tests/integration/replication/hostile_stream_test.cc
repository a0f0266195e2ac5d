// Replication against a stream that is not what it was, and against other
// publishers on its subject (docs/replication.md "A deleted or re-created
// stream", "Message ids"), with a real nats-server and real servers: a stream
// deleted and created again is applied from its first record (not resumed at
// the old sequence, which skipped its start); a state file's position in a
// lost stream is not resumed in the new one; batches whose message ids
// someone else published first are detected by their duplicate
// acknowledgement and published again under new ids.
#include <doctest/doctest.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "fixture.hh"
#include "nats_admin.hh"
#include "nats_process.hh"

using namespace ic::rtest;
using namespace std::chrono_literals;

namespace {

constexpr const char* kStream = "INFERENCECACHE";

// What an operator does after deleting the stream; a server may have
// created it again first, which is as good.
void create_again(const std::string& url) {
  try {
    ic::itest::create_changes_stream(url, kStream, std::chrono::hours(1));
  } catch (const std::runtime_error&) {
  }
}

// Reports tenant t's workload through `s`, and waits until the stream holds
// it as a message of its own.
void report_alone(Served& s, const std::string& url, int t) {
  const std::int64_t before = ic::itest::stream_last_sequence(url, kStream);
  REQUIRE(s.report(workload(t, 1, future_us())).ok());
  REQUIRE(eventually([&] { return ic::itest::stream_last_sequence(url, kStream) > before; }));
}

std::string readyz(Served& s) {
  return ic::itest::http_request(s.server.http_port(), "GET", "/readyz").body;
}

TEST_CASE("a stream deleted and created again is applied from its first record, said so") {
  TempDir dir;
  ic::itest::NatsProcess nats(dir.file(""));
  Served a(nats.url(), ""), b(nats.url(), "");
  for (int t = 0; t < 6; ++t) report_alone(a, nats.url(), t);
  REQUIRE(same_answers(a, b, 6));
  const double old_position = b.metric("inferencecache_replication_last_applied_sequence");
  CHECK(old_position >= 6);
  ic::itest::delete_stream(nats.url(), kStream);
  create_again(nats.url());
  // The new stream's first records: below B's old position, so resuming
  // there would skip them for good.
  REQUIRE(a.report(workload(6, 2, future_us())).ok());
  CHECK(same_answers(a, b, 8));
  CHECK(b.metric("inferencecache_replication_stream_resets_total") == 1);
  CHECK(
      b.server.logged("the stream was deleted or re-created; applying the new one from its "
                      "first record"));
  CHECK(readyz(b).find("stream deleted or re-created 1 times: applied again from its first "
                       "record") != std::string::npos);
  stop_all({&a, &b});
}

TEST_CASE("a state file's position in a lost stream is not resumed in the new one") {
  TempDir dir;
  ic::itest::NatsProcess nats(dir.file(""));
  Served a(nats.url(), "");
  {
    Served b(nats.url(), dir.file("b.bin"));
    for (int t = 0; t < 2; ++t) report_alone(a, nats.url(), t);
    REQUIRE(same_answers(a, b, 2));
    CHECK(b.server.stop() == 0);  // the final save holds the position: sequence 2
  }
  // NATS storage lost: the stream comes back empty and fills again, beyond
  // B's saved position.
  ic::itest::delete_stream(nats.url(), kStream);
  create_again(nats.url());
  for (int t = 2; t < 6; ++t) report_alone(a, nats.url(), t);
  CHECK(ic::itest::stream_last_sequence(nats.url(), kStream) == 4);
  Served b(nats.url(), dir.file("b.bin"));
  CHECK(same_answers(a, b, 6));
  CHECK(b.metric("inferencecache_replication_stream_resets_total") == 1);
  CHECK(b.metric("inferencecache_state_restored_entries") == 12);
  stop_all({&a, &b});
}

// This server's origin, from its "replication starting" log line.
std::string origin_of(Served& s) {
  REQUIRE(s.server.logged("replication starting"));
  const std::string log = s.server.log();
  const std::string key = "\"origin\":\"";
  const auto at = log.find(key);
  REQUIRE(at != std::string::npos);
  return log.substr(at + key.size(), log.find('"', at + key.size()) - at - key.size());
}

TEST_CASE("batches whose message ids someone else published first reach the others anyway") {
  TempDir dir;
  ic::itest::NatsProcess nats(dir.file(""));
  Served a(nats.url(), ""), b(nats.url(), "");
  const std::string origin = origin_of(a);
  CHECK(origin.size() > 17);
  CHECK(origin[origin.size() - 17] == '/');  // host/pid/start/<16 hex digits of nonce>
  // Anyone who may publish on the subject and has seen A's origin squats
  // every id A's next 12 records could be published under.
  for (int first = 1; first <= 12; ++first) {
    for (int last = first; last <= 12; ++last) {
      REQUIRE(ic::itest::publish_with_id(
          nats.url(), std::string(kStream) + ".changes",
          origin + ":" + std::to_string(first) + "-" + std::to_string(last), "squatted"));
    }
  }
  REQUIRE(a.report(workload(0, 6, future_us())).ok());  // records 1..12
  CHECK(same_answers(a, b, 6));
  CHECK(a.metric("inferencecache_replication_duplicate_acks_total") >= 1);
  CHECK(a.server.logged("a new batch was dropped as a duplicate"));
  CHECK(eventually([&] { return a.metric("inferencecache_replication_published_total") == 12; }));
  stop_all({&a, &b});
}

}  // namespace
