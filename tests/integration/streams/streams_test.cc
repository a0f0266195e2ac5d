// grpc++ (Debian libgrpc++-dev) against the real server: StreamCacheEvents
// sees exactly the events of a scripted ingest sequence through its filters, a
// subscriber that never reads is ended within its memory bound
// (docs/streams.md "Slow subscribers"), StreamMetrics carries /metrics
// samples, and Health/Watch goes SERVING → NOT_SERVING at SIGTERM.
#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "index/partition.hh"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "support/builders.hh"
#include "support/grpc_channel.hh"
#include "support/server_process.hh"

namespace pb = inferencecache::v1alpha1;
namespace health = grpc::health::v1;
using ic::itest::deadline_in;
using namespace std::chrono_literals;

namespace {

constexpr unsigned kCores = 2;

// First tenant "team-N" owned by `core` of kCores: the script spans both cores.
std::string tenant_on(unsigned core) {
  for (int i = 0;; ++i) {
    std::string t = "team-" + std::to_string(i);
    if (ic::index::owner_core(t, kCores) == core) return t;
  }
}

std::int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Served {
  explicit Served(std::vector<std::string> args = {}) : server(options(std::move(args))) {}
  static ic::itest::ServerOptions options(std::vector<std::string> args) {
    ic::itest::ServerOptions o;
    o.extra_args = std::move(args);
    return o;
  }
  ic::itest::ServerProcess server;
  std::shared_ptr<grpc::Channel> channel = ic::itest::insecure_channel(server.grpc_port());
  std::unique_ptr<pb::InferenceCache::Stub> stub = pb::InferenceCache::NewStub(channel);

  void report(const pb::CacheStateUpdate& u) {
    pb::Ack ack;
    const grpc::Status st = ic::itest::report_cache_state(*stub, {u}, &ack);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
  }
  void publish(const pb::CacheEvent& e) {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(20s));
    pb::Ack ack;
    REQUIRE(stub->PublishEvent(&ctx, e, &ack).ok());
  }
};

// An update from r1 with one 16-token exact prefix per hash.
pb::CacheStateUpdate update(const std::string& tenant, const std::string& model,
                            const std::vector<std::string>& hashes, std::int64_t ts) {
  return ic::test::r1_update(tenant, model, "vllm-sha256", hashes, ts);
}

using ic::test::r1_event;

// One open StreamCacheEvents call, registered on every core it needs once
// its initial metadata arrived.
struct Subscriber {
  Subscriber(pb::InferenceCache::Stub& stub, const pb::StreamEventsRequest& req) {
    ctx.set_deadline(deadline_in(60s));
    reader = stub.StreamCacheEvents(&ctx, req);
    reader->WaitForInitialMetadata();
  }
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<pb::CacheEvent>> reader;
};

// Events by tenant, "TYPE model hash ts" each; removals stamped by the server
// get "now" when their timestamp lies in [from, to].
using ByTenant = std::map<std::string, std::vector<std::string>>;
void add(ByTenant& out, const pb::CacheEvent& e, std::int64_t from, std::int64_t to) {
  const bool stamped = e.timestamp_us() >= from && e.timestamp_us() <= to;
  out[e.tenant_id()].push_back(pb::CacheEvent::Type_Name(e.type()) + " " + e.model_id() + " " +
                               e.prefix_hash() + " " +
                               (stamped ? "now" : std::to_string(e.timestamp_us())));
}

// Reads until the "end" sentinel of each tenant in `tenants` arrived.
ByTenant read_until_sentinels(Subscriber& s, std::size_t tenants, std::int64_t from) {
  ByTenant got;
  std::size_t ends = 0;
  pb::CacheEvent e;
  while (ends < tenants && s.reader->Read(&e)) {
    if (e.prefix_hash() == "end") {
      ++ends;
      continue;
    }
    add(got, e, from, wall_us());
  }
  CHECK(ends == tenants);
  return got;
}

}  // namespace

TEST_CASE("StreamCacheEvents: exactly the events of a scripted sequence, through filters") {
  Served s({"--threads", std::to_string(kCores)});
  const std::string a = tenant_on(0);
  const std::string b = tenant_on(1);
  Subscriber all(*s.stub, pb::StreamEventsRequest());
  pb::StreamEventsRequest only_b;
  only_b.set_tenant_id(b);
  Subscriber tenant_b(*s.stub, only_b);
  pb::StreamEventsRequest removals;
  removals.add_types(pb::CacheEvent::PREFIX_EVICTED);
  removals.add_types(pb::CacheEvent::ALL_CLEARED);
  Subscriber evicted(*s.stub, removals);

  const std::int64_t from = wall_us();
  s.report(update(a, "m", {"h1", "h2"}, 100));
  auto with_stats = update(b, "m", {"h3"}, 200);
  with_stats.mutable_stats()->set_hit_rate(0.5f);
  s.report(with_stats);
  s.report(update(b, "other", {"h4"}, 300));
  s.publish(r1_event(pb::CacheEvent::PREFIX_EVICTED, a, "h1"));
  s.publish(r1_event(pb::CacheEvent::PREFIX_EVICTED, a, "unknown"));  // nothing to remove
  s.publish(r1_event(pb::CacheEvent::REPLICA_UPDATED, b, "", 400));
  s.publish(r1_event(pb::CacheEvent::ALL_CLEARED, b));
  s.publish(r1_event(pb::CacheEvent::PREFIX_ADDED, a, "h9"));  // a no-op
  // Sentinels: one last change per tenant, removed again for `evicted`.
  for (const auto& t : {a, b}) {
    s.report(update(t, "m", {"end"}, 500));
    s.publish(r1_event(pb::CacheEvent::PREFIX_EVICTED, t, "end"));
  }

  const ByTenant want_all = {
      {a, {"PREFIX_ADDED m h1 100", "PREFIX_ADDED m h2 100", "PREFIX_EVICTED m h1 now"}},
      {b,
       {"PREFIX_ADDED m h3 200", "REPLICA_UPDATED m  200", "PREFIX_ADDED other h4 300",
        "REPLICA_UPDATED m  400", "ALL_CLEARED m  now"}},
  };
  CHECK(read_until_sentinels(all, 2, from) == want_all);
  CHECK(read_until_sentinels(tenant_b, 1, from) == ByTenant{{b, want_all.at(b)}});
  CHECK(read_until_sentinels(evicted, 2, from) ==
        ByTenant{{a, {"PREFIX_EVICTED m h1 now"}}, {b, {"ALL_CLEARED m  now"}}});
  for (Subscriber* sub : {&all, &tenant_b, &evicted}) {
    sub->ctx.TryCancel();
    CHECK(sub->reader->Finish().error_code() == grpc::StatusCode::CANCELLED);
  }
  CHECK(s.server.stop() == 0);
}

namespace {
// The server's resident set (VmRSS), bytes.
std::int64_t rss_bytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      std::int64_t kb = 0;
      in >> kb;
      return kb * 1024;
    }
  }
  return -1;
}
}  // namespace

TEST_CASE("a subscriber that never reads is ended within its bound; ingest goes on") {
  Served s({"--threads", std::to_string(kCores)});
  const std::string t = tenant_on(1);
  std::vector<std::string> hashes;
  for (int i = 0; i < 2000; ++i) hashes.push_back("prefix-hash-" + std::to_string(1000000 + i));
  s.report(update(t, "m", hashes, 1));  // the index at its final size
  Subscriber stuck(*s.stub, pb::StreamEventsRequest());
  const std::int64_t before = rss_bytes(s.server.pid());
  // 200 refreshes of 2,000 entries: 400,000 PREFIX_ADDED events (~25 MB
  // framed) for a client that reads none; the index itself does not grow.
  for (int round = 2; round < 202; ++round) s.report(update(t, "m", hashes, round));
  const std::int64_t after = rss_bytes(s.server.pid());
  MESSAGE("server RSS before ", before, " after ", after, " bytes");
  // ASan's quarantine holds freed memory: RSS says nothing there.
  if (!ic::itest::server_sanitized()) {
    CHECK(after - before < 16 * 1024 * 1024);
  }

  std::size_t n = 0;
  pb::CacheEvent e;
  while (stuck.reader->Read(&e)) ++n;
  const grpc::Status st = stuck.reader->Finish();
  MESSAGE("events delivered before the stream ended: ", n);
  CHECK(st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(st.error_message().find("event subscriber too slow") == 0);
  CHECK(n < 400000);
  // A new subscriber is served normally.
  pb::StreamEventsRequest only_t;
  only_t.set_tenant_id(t);
  Subscriber fresh(*s.stub, only_t);
  s.report(update(t, "m", {"after"}, 9));
  REQUIRE(fresh.reader->Read(&e));
  CHECK(e.prefix_hash() == "after");
  fresh.ctx.TryCancel();
  fresh.reader->Finish();
  CHECK(s.server.stop() == 0);
}

TEST_CASE("StreamMetrics: /metrics samples as Metric messages, filtered by names") {
  Served s({"--metrics-stream-interval", "200ms"});
  // Each LookupRoute on a cold index is one more NO_HINT call (a series shows
  // up in /metrics with its first call).
  auto lookup = [&s] {
    grpc::ClientContext c;
    c.set_deadline(deadline_in(20s));
    pb::LookupRouteRequest l;
    l.set_tenant_id("t");
    pb::LookupRouteResponse r;
    REQUIRE(s.stub->LookupRoute(&c, l, &r).ok());
  };
  lookup();
  pb::StreamMetricsRequest req;
  req.add_names("inferencecache_lookup_route_calls_total");
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline_in(30s));
  auto reader = s.stub->StreamMetrics(&ctx, req);
  // One series per sample (one timestamp each); the count rises to 3.
  int lookups = 1;
  double last = 0;
  std::int64_t last_ts = 0;
  pb::Metric m;
  while (last < 3) {
    REQUIRE(reader->Read(&m));
    CHECK(m.name() == "inferencecache_lookup_route_calls_total");
    CHECK(m.type() == "counter");
    CHECK(m.labels().at("reason_code") == "NO_HINT");
    CHECK(m.value() >= last);
    CHECK(m.timestamp_us() > last_ts);
    last = m.value();
    last_ts = m.timestamp_us();
    if (lookups < 3 && last == lookups) {
      lookup();
      ++lookups;
    }
  }
  CHECK(last == 3);
  ctx.TryCancel();
  reader->Finish();
  CHECK(s.server.stop() == 0);
}

TEST_CASE("Health/Watch: SERVING, then NOT_SERVING when SIGTERM starts the drain") {
  Served s;
  auto stub = health::Health::NewStub(s.channel);
  ic::itest::HealthWatch watch(*stub);
  CHECK(watch.next() == health::HealthCheckResponse::SERVING);
  s.server.signal(SIGTERM);
  CHECK(watch.next() == health::HealthCheckResponse::NOT_SERVING);
  CHECK_FALSE(watch.next());  // nothing more: the status changes once
  CHECK(watch.reader->Finish().ok());
  CHECK(s.server.wait_exit(20s) == 0);
}
