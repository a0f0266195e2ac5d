// Replication through NATS JetStream (docs/replication.md "Measured"), in one
// run on loopback: a nats-server and three servers (one reactor each).
//   lag:        10,000 ingests (4 blocks of 64 tokens) through server A, one
//               ReportCacheState stream each; per ingest, the time from A's Ack until B and C both
//               answer PREFIX_MATCH for it (polling LookupRoute): p50/p99/max.
//   throughput: 40,000 updates on 4 concurrent streams into A with B and C
//               running (updates/s until the last Ack, and until B applied
//               every record), into A with B and C stopped, and into a server
//               without replication.
// Run: IC_SERVER_BINARY=build/src/inferencecache-server
//      IC_NATS_SERVER=/usr/sbin/nats-server build/perf/replication_lag
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "../tests/integration/admin/http_client.hh"
#include "../tests/integration/replication/nats_process.hh"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "support/grpc_channel.hh"
#include "support/server_process.hh"

namespace pb = inferencecache::v1alpha1;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

constexpr int kLagIngests = 10'000;
constexpr int kStreams = 4;
constexpr int kUpdatesPerStream = 10'000;

struct Node {
  ic::itest::ServerProcess server;
  std::unique_ptr<pb::InferenceCache::Stub> stub =
      pb::InferenceCache::NewStub(ic::itest::insecure_channel(server.grpc_port()));
  explicit Node(const std::string& nats_url) : server(options(nats_url)) {}
  static ic::itest::ServerOptions options(const std::string& nats_url) {
    ic::itest::ServerOptions o;
    o.extra_args = {
        "--threads",   "1",    "--pin-threads",       "false",  "--insecure-disable-auth",
        "--log-level", "warn", "--index-max-entries", "4000000"};
    if (!nats_url.empty()) o.extra_args.insert(o.extra_args.end(), {"--nats-url", nats_url});
    return o;
  }
  double metric(const std::string& name) {
    const std::string m = ic::itest::http_request(server.http_port(), "GET", "/metrics").body;
    const auto at = m.find("\n" + name + " ");
    return at == std::string::npos ? -1 : std::stod(m.substr(at + name.size() + 2));
  }
};

std::string hb(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (56 - 8 * i));
  return s;
}

pb::CacheStateUpdate update(const std::string& tenant, std::uint64_t block, int blocks) {
  pb::CacheStateUpdate u;
  u.set_tenant_id(tenant);
  u.set_model_id("m");
  u.set_hash_scheme("vllm");
  u.set_replica_id("r1");
  auto* p = u.add_prefixes();
  for (int b = 0; b < blocks; ++b) {
    p->add_block_hashes(hb(block * 16 + static_cast<std::uint64_t>(b)));
    p->add_block_token_counts(64);
  }
  return u;
}

bool report(pb::InferenceCache::Stub& stub, const std::vector<pb::CacheStateUpdate>& updates) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 120s);
  pb::Ack ack;
  auto w = stub.ReportCacheState(&ctx, &ack);
  for (const auto& u : updates) w->Write(u);
  w->WritesDone();
  return w->Finish().ok();
}

bool visible(pb::InferenceCache::Stub& stub, const std::string& tenant, std::uint64_t block) {
  pb::LookupRouteRequest r;
  r.set_tenant_id(tenant);
  r.set_model_id("m");
  r.set_hash_scheme("vllm");
  for (std::uint64_t b = 0; b < 4; ++b) {
    r.add_block_hashes(hb(block * 16 + b));
    r.add_block_token_counts(64);
  }
  grpc::ClientContext ctx;
  pb::LookupRouteResponse out;
  return stub.LookupRoute(&ctx, r, &out).ok() && out.reason_code() == "PREFIX_MATCH";
}

void lag(Node& a, Node& b, Node& c) {
  std::vector<double> ms;
  ms.reserve(kLagIngests);
  for (int i = 0; i < kLagIngests; ++i) {
    const std::string tenant = "lag-" + std::to_string(i % 64);
    const auto block = static_cast<std::uint64_t>(i);
    if (!report(*a.stub, {update(tenant, block, 4)})) std::fprintf(stderr, "ingest failed\n");
    if (i == 0 && !visible(*a.stub, tenant, block)) {
      std::fprintf(stderr, "the ingest is not answered by the server that took it\n");
      std::exit(1);
    }
    const auto acked = Clock::now();
    const auto give_up = acked + 30s;
    while (!visible(*b.stub, tenant, block) && Clock::now() < give_up) {
    }
    while (!visible(*c.stub, tenant, block) && Clock::now() < give_up) {
    }
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - acked).count());
  }
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) { return ms[static_cast<std::size_t>(q * (ms.size() - 1))]; };
  std::printf(
      "lag over %d ingests (A's Ack -> B and C answer it): p50 %.2f ms  p99 %.2f ms  "
      "max %.2f ms\n",
      kLagIngests, at(0.5), at(0.99), ms.back());
}

// Updates/s of kStreams concurrent streams of kUpdatesPerStream 4-block updates.
double ingest(Node& node, const std::string& prefix) {
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int s = 0; s < kStreams; ++s) {
    threads.emplace_back([&, s] {
      std::vector<pb::CacheStateUpdate> batch;
      for (int i = 0; i < kUpdatesPerStream; ++i) {
        batch.push_back(update(prefix + std::to_string(s * 64 + i % 64),
                               static_cast<std::uint64_t>(s * kUpdatesPerStream + i), 4));
      }
      if (!report(*node.stub, batch)) std::fprintf(stderr, "throughput stream failed\n");
    });
  }
  for (auto& t : threads) t.join();
  return kStreams * kUpdatesPerStream / std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

}  // namespace

int main() {
  std::printf("load average at start: %s\n", loadavg().c_str());
  char tmpl[] = "/tmp/ic-repl-perf-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  {
    ic::itest::NatsProcess nats(dir);
    Node a(nats.url()), b(nats.url()), c(nats.url());
    lag(a, b, c);

    // Replication on with three servers (each applies all 40,000 updates, all
    // sharing this machine's CPUs with NATS), then with A alone + NATS, then off.
    const double before = b.metric("inferencecache_replication_last_applied_sequence");
    const auto t0 = Clock::now();
    const double on3 = ingest(a, "on3-");
    const double target = before + kStreams * kUpdatesPerStream;
    while (b.metric("inferencecache_replication_last_applied_sequence") < target &&
           Clock::now() - t0 < 300s) {
      std::this_thread::sleep_for(5ms);
    }
    const double applied3 =
        kStreams * kUpdatesPerStream / std::chrono::duration<double>(Clock::now() - t0).count();
    b.server.stop();
    c.server.stop();
    const double on1 = ingest(a, "on1-");
    Node alone("");
    const double off = ingest(alone, "off-");
    std::printf("ingest, %d streams x %d updates of 4 blocks (updates/s, %% of off):\n", kStreams,
                kUpdatesPerStream);
    std::printf("  replication off                    %9.0f\n", off);
    std::printf("  on, 3 servers, until the last Ack  %9.0f  %3.0f %%\n", on3, 100 * on3 / off);
    std::printf("  on, 3 servers, until B applied all %9.0f  %3.0f %%\n", applied3,
                100 * applied3 / off);
    std::printf("  on, 1 server + NATS, last Ack      %9.0f  %3.0f %%\n", on1, 100 * on1 / off);
    std::printf("  dropped on A: %.0f, publish failures on A: %.0f\n",
                a.metric("inferencecache_replication_dropped_total"),
                a.metric("inferencecache_replication_publish_failures_total"));
    a.server.stop();
    alone.server.stop();
  }
  std::filesystem::remove_all(dir);
  std::printf("load average at end: %s\n", loadavg().c_str());
  return 0;
}
