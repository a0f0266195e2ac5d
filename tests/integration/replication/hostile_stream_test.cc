// Replication against a stream that is not what it was, and against other
// publishers on its subject (docs/replication.md "A deleted or re-created
// stream", "Message ids"), with a real nats-server and real servers: a stream
// deleted and created again is applied from its first record (not resumed at
// the old sequence, which skipped its start); a state file's position in a
// lost stream is not resumed in the new one; batches whose message ids
// someone else published first are detected by their duplicate
// acknowledgement and published again under new ids.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fixture.hh"
#include "inferencecache/state/v1/state.pb.h"
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

// One stream message as a server writes it: a ReplicationBatch of 256
// records, each a 64-block chain of one of 8 tenants (195 KB). The
// same body again and again re-reports the same 16,384 entries.
std::string burst_message() {
  inferencecache::state::v1::ReplicationBatch batch;
  batch.set_format_version(2);
  for (int r = 0; r < 256; ++r) {
    auto* record = batch.add_records();
    record->set_format_version(1);
    record->set_origin("burst");
    record->set_origin_sequence(static_cast<std::uint64_t>(r) + 1);
    pb::CacheStateUpdate* u = record->mutable_update();
    u->set_tenant_id(tenant_name(r % 8));
    u->set_model_id("m");
    u->set_hash_scheme("vllm");
    u->set_replica_id("r-burst");
    u->set_timestamp_us(future_us());
    auto* p = u->add_prefixes();
    for (int b = 0; b < 64; ++b) {
      p->add_block_hashes(block_hash(static_cast<std::uint64_t>(r) * 64 + b + 1));
      p->add_block_token_counts(16);
    }
  }
  return batch.SerializeAsString();
}

// VmRSS and VmHWM of `pid`, MB.
std::pair<double, double> rss_mb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  double rss = -1, hwm = -1;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) rss = std::stod(line.substr(6)) / 1024;
    if (line.rfind("VmHWM:", 0) == 0) hwm = std::stod(line.substr(6)) / 1024;
  }
  return {rss, hwm};
}

// Writes "5" to /proc/PID/clear_refs: VmHWM starts again from VmRSS.
void reset_peak(pid_t pid) { std::ofstream("/proc/" + std::to_string(pid) + "/clear_refs") << "5"; }

// The RSS once freed memory went back: the least of 6 samples over 3 s.
double settled_mb(pid_t pid) {
  double least = rss_mb(pid).first;
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(500ms);
    least = std::min(least, rss_mb(pid).first);
  }
  return least;
}

TEST_CASE("a burst on the stream is applied in bounded rounds: memory stays near steady") {
  TempDir dir;
  ic::itest::NatsProcess nats(dir.file(""));
  const std::string body = burst_message();
  const std::string subject = std::string(kStream) + ".changes";
  REQUIRE(body.size() > 190'000);
  double steady = 0;
  {
    // Steady: a server that applied the burst's entries once.
    Served ref(nats.url(), "");
    REQUIRE(ic::itest::publish_with_id(nats.url(), subject, "warm-up", body));
    REQUIRE(
        eventually([&] { return ref.metric("inferencecache_replication_applied_total") == 256; }));
    steady = settled_mb(ref.server.pid());
    CHECK(ref.server.stop() == 0);
  }
  // IC_BURST_MESSAGES (default 1024: 200 MB; 2048 for the 400 MB of the issue).
  const char* env = std::getenv("IC_BURST_MESSAGES");
  const int messages = env != nullptr ? std::atoi(env) : 1024;
  for (int m = 0; m < messages; ++m) {
    REQUIRE(ic::itest::publish_with_id(nats.url(), subject, "burst-" + std::to_string(m), body));
  }
  // A server started now catches up the whole burst as fast as it can.
  const auto t0 = std::chrono::steady_clock::now();
  Served b(nats.url(), "");
  REQUIRE(eventually(
      [&] {
        return b.metric("inferencecache_replication_applied_total") == 256.0 * (messages + 1);
      },
      300s));
  const double peak = rss_mb(b.server.pid()).second;
  const double after = settled_mb(b.server.pid());
  const double catch_up_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "burst of %d messages (%.0f MB) caught up in %.1f s: RSS steady %.1f MB, peak %.1f "
      "MB (%.2fx), after %.1f MB (%.2fx)\n",
      messages, messages * static_cast<double>(body.size()) / 1e6, catch_up_s, steady, peak,
      peak / steady, after, after / steady);
  // Bounded whatever the burst's size (docs/replication.md "Applying the
  // stream"): one fetch (a max payload) and 512 records in flight; and the
  // pages they took are handed back once the burst is applied (mi_collect on
  // the replication thread and every core). The push consumer it replaced
  // peaked at 1.8-2.3x here; before the hand-back a 200-400 MB catch-up
  // stayed at 1.4-1.8x steady. Its steady is another process's (this one
  // starts with the burst waiting), so its peak keeps an absolute bound.
  // ASan's quarantine holds freed memory: RSS says nothing there.
  if (!ic::itest::server_sanitized()) {
    CHECK(peak - steady <= 48);
    CHECK(after <= 1.5 * steady);
  }
  CHECK(b.server.stop() == 0);
}

// LookupRoute latencies of one tenant, in a loop on a thread of its own
// until stopped (µs, sorted).
class NeighbourProbe {
 public:
  explicit NeighbourProbe(Served& s) : request_(probes(1)[0]), s_(s) {
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        const auto t0 = std::chrono::steady_clock::now();
        const std::string answer = s_.lookup(request_);
        const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::steady_clock::now() - t0)
                            .count();
        if (answer.rfind("error", 0) == 0) ++errors_;
        latencies_.push_back(static_cast<double>(us));
        std::this_thread::sleep_for(2ms);
      }
    });
  }
  std::vector<double> stop() {
    stop_.store(true);
    thread_.join();
    std::sort(latencies_.begin(), latencies_.end());
    return latencies_;
  }
  int errors() const { return errors_; }

 private:
  pb::LookupRouteRequest request_;
  Served& s_;
  std::atomic<bool> stop_{false};
  std::vector<double> latencies_;
  int errors_ = 0;
  std::thread thread_;
};

double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return -1;
  return sorted[static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1))];
}

TEST_CASE(
    "a burst applied while serving: RSS within 1.5x of steady + a segment, neighbours answered") {
  TempDir dir;
  ic::itest::NatsProcess nats(dir.file(""));
  const std::string body = burst_message();
  const std::string subject = std::string(kStream) + ".changes";
  Served b(nats.url(), "");
  // Steady: the burst's 16,384 entries applied once, and a neighbour tenant
  // (tenant-0 of the two-replica workload) reported directly.
  REQUIRE(b.report(workload(0, 1, future_us())).ok());
  REQUIRE(eventually([&] { return ic::itest::stream_last_sequence(nats.url(), kStream) >= 1; }));
  REQUIRE(ic::itest::publish_with_id(nats.url(), subject, "warm-up", body));
  // Everything the stream holds is applied.
  const auto applied_all = [&] {
    return b.metric("inferencecache_replication_last_applied_sequence") ==
           static_cast<double>(ic::itest::stream_last_sequence(nats.url(), kStream));
  };
  REQUIRE(eventually(applied_all));
  const double steady = settled_mb(b.server.pid());
  reset_peak(b.server.pid());
  // IC_BURST_MESSAGES (default 1024: 200 MB; 2048 for the 400 MB of the issue).
  const char* env = std::getenv("IC_BURST_MESSAGES");
  const int messages = env != nullptr ? std::atoi(env) : 1024;
  NeighbourProbe probe(b);
  const auto t0 = std::chrono::steady_clock::now();
  for (int m = 0; m < messages; ++m) {
    REQUIRE(ic::itest::publish_with_id(nats.url(), subject, "burst-" + std::to_string(m), body));
  }
  REQUIRE(eventually(applied_all, 300s));
  const double burst_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<double> lat = probe.stop();
  const double peak = rss_mb(b.server.pid()).second;
  const double after = settled_mb(b.server.pid());
  std::printf(
      "live burst of %d messages (%.0f MB) in %.1f s: RSS steady %.1f MB, peak %.1f MB "
      "(%.2fx), after %.1f MB (%.2fx); neighbour LookupRoute (%zu calls) p50 %.2f ms, "
      "p99 %.2f ms, max %.2f ms\n",
      messages, messages * static_cast<double>(body.size()) / 1e6, burst_s, steady, peak,
      peak / steady, after, after / steady, lat.size(), quantile(lat, 0.5) / 1000,
      quantile(lat, 0.99) / 1000, quantile(lat, 1.0) / 1000);
  CHECK(probe.errors() == 0);
  CHECK(lat.size() > 10);
  // Peak and settled within 1.5x of steady (docs/replication.md "Applying the
  // stream": one fetch, 512 records in flight, the pages handed back after).
  // The push consumer's rounds and its library's 4 MiB of pending messages
  // peaked at 1.3-2.2x here.
  // ASan's quarantine holds freed memory: RSS says nothing there. The bound
  // allows one mimalloc segment (32 MiB) over 1.5x: mimalloc 2.0.9 decommits a
  // segment's freed spans only at that segment's next use, never from an idle
  // core's collect (docs/hostile-peers.md "Tests"), and a CI run here read
  // 56.3 MB peak and 55.2 MB settled over 26.2 MB steady that way (the same
  // 56.3 MiB as streams rounds' held segment). Before the bounded rounds it was
  // 8-9x the bytes received, and it stayed.
  if (!ic::itest::server_sanitized()) {
    const double bound = 1.5 * steady + 32 * 1.048576;
    CHECK(peak <= bound);
    CHECK(after <= bound);
  }
  CHECK(b.server.stop() == 0);
}

// A CA, a NATS server certificate for 127.0.0.1 and a client certificate,
// made with the openssl command line in `dir`.
void make_pki(const TempDir& dir) {
  const std::string d = dir.path.string();
  std::ofstream(d + "/server.ext") << "subjectAltName=IP:127.0.0.1\n";
  std::ofstream(d + "/client.ext") << "extendedKeyUsage=clientAuth\n";
  const std::string cmd =
      "cd " + d +
      " && openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=test-ca -keyout ca.key "
      "-out ca.crt"
      " && openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout server.key -out "
      "server.csr"
      " && openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
      "-extfile server.ext -out server.crt"
      " && openssl req -newkey rsa:2048 -nodes -subj /CN=inferencecache -keyout client.key -out "
      "client.csr"
      " && openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
      "-extfile client.ext -out client.crt";
  REQUIRE(std::system((cmd + " >/dev/null 2>&1").c_str()) == 0);
}

TEST_CASE("--nats-tls-*: replication over TLS to a NATS server that verifies its clients") {
  TempDir dir;
  make_pki(dir);
  const std::string d = dir.path.string();
  std::ofstream(d + "/nats.conf") << "tls {\n  cert_file: \"" << d
                                  << "/server.crt\"\n  key_file: \"" << d
                                  << "/server.key\"\n  ca_file: \"" << d
                                  << "/ca.crt\"\n  verify: true\n}\n";
  std::filesystem::create_directory(d + "/store");
  ic::itest::NatsProcess nats(d + "/store", d + "/nats.conf");
  const std::vector<std::string> tls = {"--nats-tls-ca-file",   d + "/ca.crt",
                                        "--nats-tls-cert-file", d + "/client.crt",
                                        "--nats-tls-key-file",  d + "/client.key"};
  Served a(nats.url(), "", tls), b(nats.url(), "", tls);
  REQUIRE(a.report(workload(0, 4, future_us())).ok());
  CHECK(same_answers(a, b, 4));
  CHECK(b.metric("inferencecache_replication_connected") == 1);
  CHECK(eventually([&] { return a.metric("inferencecache_replication_published_total") == 8; }));
  // Without a client certificate the NATS server refuses the connection.
  Served plain(nats.url(), "", {"--nats-startup-wait", "1s"});
  CHECK(plain.metric("inferencecache_replication_connected") == 0);
  CHECK(plain.metric("inferencecache_replication_applied_total") == 0);
  stop_all({&a, &b, &plain});
}

}  // namespace
