// Replication through NATS JetStream (docs/replication.md) with a real
// nats-server and three real servers on loopback: ingest through one server
// is answered identically by the others; a server killed with -9 mid-ingest
// and restarted converges; NATS stopped while ingest goes on, then
// restarted: everything converges; a state file of the previous format
// version is refused cleanly and the stream rebuilds the index. Every wait
// polls with a generous deadline; nothing asserts timing.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "fixture.hh"
#include "nats_admin.hh"
#include "nats_process.hh"
#include "xxhash.h"

using namespace ic::rtest;
using namespace std::chrono_literals;

namespace {

constexpr const char* kPolicy =
    R"({"version":7,"policies":[{"namespace":"tenant-0","routingFloorScore":1e9}]})";

TEST_CASE("ingest, events and a policy through one server: the other two answer identically") {
  TempDir dir;
  ic::itest::NatsProcess nats(dir.file(""));
  Served a(nats.url(), ""), b(nats.url(), ""), c(nats.url(), "");
  REQUIRE(a.report(workload(0, 8, future_us())).ok());
  const std::vector<std::string> want = answers(a, 9);
  CHECK(want[1].find("PREFIX_MATCH") != std::string::npos);
  CHECK(want[8].find("PREFIX_MATCH") == std::string::npos);  // never reported
  CHECK(same_answers(a, b, 9));
  CHECK(same_answers(a, c, 9));
  CHECK(answers(b, 9) == want);
  // 16 records from A, applied on every server (A's own included).
  CHECK(eventually([&] { return b.metric("inferencecache_replication_applied_total") == 16; }));
  CHECK(a.metric("inferencecache_replication_applied_total") == 16);
  CHECK(a.metric("inferencecache_replication_published_total") == 16);
  // No other server's record came between: A's early applies stood in stream
  // order and its echoes were skipped (not asserted exactly: an echo may,
  // rarely, reach a core before its early apply did, and is then applied).
  CHECK(
      eventually([&] { return a.metric("inferencecache_replication_echoes_skipped_total") > 0; }));
  CHECK(b.metric("inferencecache_replication_echoes_skipped_total") == 0);
  // Sequences count stream messages, each a batch of A's records.
  const auto last = ic::itest::stream_last_sequence(nats.url(), "INFERENCECACHE");
  CHECK(last >= 1);
  CHECK(last <= 16);
  CHECK(eventually(
      [&] { return b.metric("inferencecache_replication_last_applied_sequence") == last; }));
  CHECK(c.metric("inferencecache_replication_connected") == 1);
  CHECK(b.metric("inferencecache_replication_published_total") == 0);

  // A replica cleared through B and a policy through C reach everyone.
  b.clear_replica(tenant_name(2));
  CHECK(ic::itest::http_request(c.server.snapshot_port(), "POST", "/policy", kPolicy).status ==
        204);
  CHECK(eventually([&] {
    const auto got = answers(a, 9);
    return got[0].find("PREFIX_MATCH") == std::string::npos && got[2] != want[2];
  }));
  CHECK(same_answers(a, b, 9));
  CHECK(same_answers(a, c, 9));
  const std::string readyz = ic::itest::http_request(b.server.http_port(), "GET", "/readyz").body;
  CHECK(readyz == "ok\nreplication: connected, stream INFERENCECACHE applied through " +
                      std::to_string(last + 2) +
                      ", lag 0 records, 0 changes to publish, 0 dropped");
  stop_all({&a, &b, &c});
}

TEST_CASE("a P/D topology pushed through one server is answered by the other") {
  TempDir dir;
  ic::itest::NatsProcess nats(dir.file(""));
  Served a(nats.url(), ""), b(nats.url(), "");
  constexpr const char* kPdPolicy = R"({"version":7,"pdTopologies":[{"name":"pd",
    "transport":"NIXL","prefill":[{"replica":"p0","zone":"z0"},{"replica":"p1","zone":"z1"}],
    "decode":[{"replica":"d0","zone":"z1"}],"requiredDomain":"zone"}]})";
  // Tenant "pd-new" is unknown to the index: nothing is booked, so both
  // servers answer the same, and only p1 shares a zone with d0.
  const auto request = ic::itest::pd_request("pd-new", "pd", 100, 8);
  CHECK(ic::itest::pd_lookup_text(*b.stub, request) == R"(reason_code: "UNKNOWN_TOPOLOGY")");
  REQUIRE(ic::itest::http_request(a.server.snapshot_port(), "POST", "/policy", kPdPolicy).status ==
          204);
  const std::string want =
      R"(prefill_replica_id: "p1" decode_replica_id: "d0" transport_hint: "NIXL" )"
      R"(reason_code: "DISAGGREGATED" prefill_score: 0.5 decode_score: 1 uncached_tokens: 4096)";
  CHECK(ic::itest::pd_lookup_text(*a.stub, request) == want);
  CHECK(eventually([&] { return ic::itest::pd_lookup_text(*b.stub, request) == want; }));
  CHECK(ic::itest::http_request(b.server.snapshot_port(), "GET", "/policy").body ==
        std::string(kPdPolicy) + "\n");
  stop_all({&a, &b});
}

// The echo rule (docs/replication.md "Applying the stream") where it must
// apply echoes again: for each tenant in turn, A ingests replica r-a while
// B clears it at the same moment, so the stream often holds B's clear
// between A's early apply and A's echo. C only applies the stream in order;
// A and B must end with exactly its answers, tenant by tenant. (Skipping
// every echo fails this: A keeps the ingest where the stream cleared it.)
TEST_CASE("two servers writing the same entries at once end with the stream-order answers") {
  TempDir dir;
  ic::itest::NatsProcess nats(dir.file(""));
  Served a(nats.url(), ""), b(nats.url(), ""), c(nats.url(), "");
  constexpr int kTenants = 48;
  std::barrier together(2);
  std::atomic<bool> all_ok{true};
  std::thread writer([&] {
    for (int t = 0; t < kTenants; ++t) {
      together.arrive_and_wait();
      if (!a.report(workload(t, 1, future_us())).ok()) all_ok = false;
    }
  });
  for (int t = 0; t < kTenants; ++t) {
    together.arrive_and_wait();
    b.clear_replica(tenant_name(t));
  }
  writer.join();
  CHECK(all_ok.load());
  // Everything published, then applied everywhere through the stream's end.
  // The end is read again on every poll, and must hold twice 300 ms apart:
  // the replication thread refreshes the pending gauge once per loop, so it
  // can read 0 with the last records still in the outbox (a `last` read once
  // then was passed by every server: 42 applied against 40).
  const auto settled = [&] {
    const auto last =
        static_cast<double>(ic::itest::stream_last_sequence(nats.url(), "INFERENCECACHE"));
    if (a.metric("inferencecache_replication_pending_records") != 0 ||
        b.metric("inferencecache_replication_pending_records") != 0)
      return false;
    for (Served* s : {&a, &b, &c}) {
      if (s->metric("inferencecache_replication_last_applied_sequence") != last) return false;
    }
    return true;
  };
  CHECK(eventually([&] {
    if (!settled()) return false;
    std::this_thread::sleep_for(300ms);
    return settled();
  }));
  const std::vector<std::string> want = answers(c, kTenants);
  CHECK(answers(a, kTenants) == want);
  CHECK(answers(b, kTenants) == want);
  stop_all({&a, &b, &c});
}

TEST_CASE("a server killed with -9 mid-ingest and restarted converges") {
  TempDir dir;
  ic::itest::NatsProcess nats(dir.file(""));
  Served a(nats.url(), "");
  auto b = std::make_unique<Served>(nats.url(), dir.file("b.state"));
  Served c(nats.url(), "");
  constexpr int kTenants = 120;
  std::atomic<int> sent{0};
  std::atomic<bool> all_ok{true};
  std::thread writer([&] {
    const std::int64_t ts = future_us();
    for (int t = 0; t < kTenants; t += 4) {
      if (!a.report(workload(t, 4, ts)).ok()) all_ok = false;
      sent += 4;
    }
  });
  REQUIRE(eventually([&] { return sent.load() >= kTenants / 3; }));
  // A periodic save has happened (the restart resumes from its position).
  REQUIRE(eventually([&] { return std::filesystem::exists(dir.file("b.state")); }));
  b->server.signal(SIGKILL);
  CHECK(b->server.wait_exit(10s) == 128 + SIGKILL);
  writer.join();
  CHECK(all_ok.load());
  b = std::make_unique<Served>(nats.url(), dir.file("b.state"));
  CHECK(b->metrics().find("inferencecache_state_loads_total{result=\"ok\"} 1") !=
        std::string::npos);
  CHECK(same_answers(a, *b, kTenants));
  CHECK(same_answers(a, c, kTenants));
  CHECK(answers(*b, kTenants)[kTenants - 1].find("PREFIX_MATCH") != std::string::npos);
  stop_all({&a, b.get(), &c});
}

TEST_CASE("NATS stopped: serving and ingest go on locally, visible; restarted: all converge") {
  TempDir dir;
  ic::itest::NatsProcess nats(dir.file(""));
  Served a(nats.url(), ""), b(nats.url(), ""), c(nats.url(), "");
  REQUIRE(a.report(workload(0, 4, future_us())).ok());
  REQUIRE(same_answers(a, c, 8));
  nats.stop();
  CHECK(eventually([&] { return a.metric("inferencecache_replication_connected") == 0; }));
  // Ingest through A and a replica cleared through B while NATS is away.
  REQUIRE(a.report(workload(4, 4, future_us())).ok());
  b.clear_replica(tenant_name(1));
  const std::vector<std::string> local_a = answers(a, 8);
  CHECK(local_a[5].find("PREFIX_MATCH") != std::string::npos);  // applied locally at once
  CHECK(c.lookup(probes(8)[5]).find("PREFIX_MATCH") == std::string::npos);  // not replicated yet
  // The gauge follows the buffer within one turn of the replication thread.
  CHECK(eventually([&] { return a.metric("inferencecache_replication_pending_records") == 8; }));
  const auto readyz = ic::itest::http_request(a.server.http_port(), "GET", "/readyz");
  CHECK(readyz.status == 200);
  CHECK(readyz.body.find("NATS unreachable, serving from local state") != std::string::npos);
  CHECK(readyz.body.find("8 changes to publish, 0 dropped") != std::string::npos);

  nats.start();
  CHECK(eventually([&] { return a.metric("inferencecache_replication_pending_records") == 0; }));
  CHECK(same_answers(a, b, 8));
  CHECK(same_answers(a, c, 8));
  const std::vector<std::string> after = answers(c, 8);
  CHECK(after[5].find("PREFIX_MATCH") != std::string::npos);
  CHECK(after[1] != local_a[0]);
  CHECK(a.metric("inferencecache_replication_dropped_total") == 0);
  CHECK(a.metric("inferencecache_replication_connected") == 1);
  stop_all({&a, &b, &c});
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The bytes the previous build (state format 1) wrote for the same index:
// the same layout with version 1 (docs/persistence.md "Versions").
std::string as_version_1(std::string bytes) {
  bytes[8] = '\x01';
  const std::size_t end = bytes.size() - 8;
  const std::uint64_t sum = XXH3_64bits(bytes.data(), end);
  for (int i = 0; i < 8; ++i) bytes[end + i] = static_cast<char>(sum >> (8 * i));
  return bytes;
}

TEST_CASE("a state file of the previous format version is refused cleanly; the stream rebuilds") {
  TempDir dir;
  ic::itest::NatsProcess nats(dir.file(""));
  Served a(nats.url(), dir.file("a.state"));
  REQUIRE(a.report(workload(0, 6, future_us())).ok());
  REQUIRE(eventually([&] { return a.metric("inferencecache_replication_published_total") == 12; }));
  const std::string v2 = [&] {
    Served saver(nats.url(), dir.file("b.state"));
    REQUIRE(same_answers(a, saver, 6));
    CHECK(saver.server.stop() == 0);
    return slurp(dir.file("b.state"));
  }();
  REQUIRE(v2.substr(8, 4) == std::string("\x02\0\0\0", 4));
  std::ofstream(dir.file("b.state"), std::ios::binary | std::ios::trunc) << as_version_1(v2);
  Served b(nats.url(), dir.file("b.state"));
  CHECK(b.metrics().find("inferencecache_state_loads_total{result=\"wrong_version\"} 1") !=
        std::string::npos);
  CHECK(b.metric("inferencecache_state_restored_entries") == 0);
  CHECK(same_answers(a, b, 6));  // rebuilt from the stream's first record
  CHECK(b.server.stop() == 0);
  CHECK(b.server.log().find("format version 1, this build reads 2") != std::string::npos);
  CHECK(a.server.stop() == 0);
}

}  // namespace
