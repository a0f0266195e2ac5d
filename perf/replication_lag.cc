// Replication through NATS JetStream (docs/replication.md "Measured"), in one
// run on loopback: a nats-server and three servers (one reactor each).
//   lag:        10,000 ingests (4 blocks of 64 tokens) through server A, one
//               ReportCacheState stream each; per ingest, the time from A's Ack until B and C both
//               answer PREFIX_MATCH for it (polling LookupRoute): p50/p99/max.
//   throughput: 200,000 updates on 4 concurrent streams into one server, on
//               fresh servers per phase: without replication; with NATS and
//               that server alone; with NATS and three servers. Wall rate
//               (until the last Ack, and until every server applied all),
//               and each server's CPU time per update over the phase (from
//               the first update sent until every server applied the last:
//               the run time of all its threads, /proc/<pid>/task/*/schedstat,
//               so start-up and shutdown are left out): on cores of its own
//               a server's rate is the inverse, so "on vs off" per server is
//               the CPU ratio.
// Run: IC_SERVER_BINARY=build/src/inferencecache-server
//      IC_NATS_SERVER=/usr/sbin/nats-server build/perf/replication_lag [--throughput-only]
// (--throughput-only leaves out the lag phase: for before/after runs of two
// server builds alternated through IC_SERVER_BINARY.)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
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
constexpr int kUpdatesPerStream = 50'000;

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

// CPU ns `node`'s threads have run so far (the first field of each thread's
// schedstat, ns on the CPU; no thread of a server ends mid-phase).
double cpu_ns(Node& node) {
  double ns = 0;
  const std::string tasks = "/proc/" + std::to_string(node.server.pid()) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks)) {
    std::ifstream in(task.path() / "schedstat");
    double run = 0;
    if (in >> run) ns += run;
  }
  return ns;
}

// Waits until `node` applied `target` changes (stream sequences count
// messages, each a batch of changes); false after 300 s.
bool applied(Node& node, double target) {
  const auto give_up = Clock::now() + 300s;
  while (node.metric("inferencecache_replication_applied_total") < target) {
    if (Clock::now() > give_up) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

struct Phase {
  double rate = 0;            // updates/s until the last Ack
  double applied_rate = 0;    // updates/s until every server applied all (replication on)
  double cpu_origin_us = 0;   // CPU µs per update of the server that took the ingest
  double cpu_replica_us = 0;  // ... of a server that only applies the stream (B)
  double echoes_skipped = 0;  // the origin's own records not applied twice (-1: not counted)
};

// Fresh NATS and `servers` servers (0: one server without replication);
// 200,000 updates into the first; every server's CPU per update.
Phase throughput(const std::string& dir, int servers) {
  Phase out;
  const std::string store = dir + "/" + std::to_string(servers);
  std::filesystem::create_directories(store);
  ic::itest::NatsProcess nats(store);
  std::vector<std::unique_ptr<Node>> nodes;
  for (int i = 0; i < std::max(servers, 1); ++i) {
    nodes.push_back(std::make_unique<Node>(servers == 0 ? std::string() : nats.url()));
  }
  std::vector<double> cpu_before;
  for (auto& n : nodes) cpu_before.push_back(cpu_ns(*n));
  const auto t0 = Clock::now();
  out.rate = ingest(*nodes[0], "u-");
  if (servers > 0) {
    for (auto& n : nodes) {
      if (!applied(*n, kStreams * kUpdatesPerStream)) std::fprintf(stderr, "not applied\n");
    }
    out.applied_rate =
        kStreams * kUpdatesPerStream / std::chrono::duration<double>(Clock::now() - t0).count();
    if (const double d = nodes[0]->metric("inferencecache_replication_dropped_total"); d != 0) {
      std::fprintf(stderr, "dropped on the origin: %.0f\n", d);
    }
    out.echoes_skipped = nodes[0]->metric("inferencecache_replication_echoes_skipped_total");
  }
  auto per_update_us = [&](std::size_t i) {
    return (cpu_ns(*nodes[i]) - cpu_before[i]) / 1e3 / (kStreams * kUpdatesPerStream);
  };
  out.cpu_origin_us = per_update_us(0);
  if (servers > 1) out.cpu_replica_us = per_update_us(1);
  for (auto& n : nodes) n->server.stop();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const bool lag_phase = !(argc > 1 && std::string(argv[1]) == "--throughput-only");
  std::printf("load average at start: %s\n", loadavg().c_str());
  char tmpl[] = "/tmp/ic-repl-perf-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  if (lag_phase) {
    ic::itest::NatsProcess nats(dir);
    Node a(nats.url()), b(nats.url()), c(nats.url());
    lag(a, b, c);
    for (Node* n : {&a, &b, &c}) n->server.stop();
  }
  // Each phase on fresh servers, so its CPU figures are its own.
  const Phase off = throughput(dir, 0);
  const Phase on1 = throughput(dir, 1);
  const Phase on3 = throughput(dir, 3);
  std::printf("ingest, %d streams x %d updates of 4 blocks into one server:\n", kStreams,
              kUpdatesPerStream);
  std::printf("  wall rate (updates/s; every process shares this machine's CPUs):\n");
  std::printf("    replication off                     %9.0f\n", off.rate);
  std::printf("    on, 1 server + NATS, last Ack       %9.0f  %3.0f %%\n", on1.rate,
              100 * on1.rate / off.rate);
  std::printf("    on, 3 servers, last Ack             %9.0f  %3.0f %%\n", on3.rate,
              100 * on3.rate / off.rate);
  std::printf("    on, 3 servers, all applied          %9.0f  %3.0f %%\n", on3.applied_rate,
              100 * on3.applied_rate / off.rate);
  std::printf("  CPU per update (µs; a server's rate on cores of its own = 1 / this):\n");
  std::printf("    replication off                     %7.2f\n", off.cpu_origin_us);
  std::printf("    on, 1 server: the origin            %7.2f  rate %3.0f %% of off\n",
              on1.cpu_origin_us, 100 * off.cpu_origin_us / on1.cpu_origin_us);
  std::printf("    on, 3 servers: the origin (A)       %7.2f  rate %3.0f %% of off\n",
              on3.cpu_origin_us, 100 * off.cpu_origin_us / on3.cpu_origin_us);
  std::printf("    on, 3 servers: a replica (B)        %7.2f  rate %3.0f %% of off\n",
              on3.cpu_replica_us, 100 * off.cpu_origin_us / on3.cpu_replica_us);
  std::printf("  echoes skipped by the origin (of %d): 1 server %.0f, 3 servers %.0f\n",
              kStreams * kUpdatesPerStream, on1.echoes_skipped, on3.echoes_skipped);
  std::filesystem::remove_all(dir);
  std::printf("load average at end: %s\n", loadavg().c_str());
  return 0;
}
