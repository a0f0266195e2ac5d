// StreamCacheEvents through the in-memory client on core 0 of a two-core
// FakeLink (docs/streams.md): exact events of a scripted sequence, filters,
// registration before headers, the slow-subscriber bound, and the shard's
// sink removed with the last subscriber.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "index/partition.hh"
#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "service/event_fanout.hh"
#include "service_fixture.hh"
#include "sharding/sharded_index.hh"
#include "support/builders.hh"
#include "two_core_index.hh"

namespace pb = ::inferencecache::v1alpha1;
using ic::test::frame;
using ic::test::unframe;

namespace {

constexpr std::int64_t kWall = 1'700'000'000'000'000;

std::string method(std::string_view m) {
  return "/inferencecache.v1alpha1.InferenceCache/" + std::string(m);
}

// First tenant name "tenant-N" owned by `core` of 2.
std::string tenant_on(unsigned core) {
  for (int i = 0;; ++i) {
    std::string t = "tenant-" + std::to_string(i);
    if (ic::index::owner_core(t, 2) == core) return t;
  }
}

// An update from r1 with one 16-token exact prefix per hash.
pb::CacheStateUpdate update(const std::string& tenant, const std::string& model,
                            const std::vector<std::string>& hashes, std::int64_t ts = 0) {
  return ic::test::r1_update(tenant, model, "s", hashes, ts);
}

using ic::test::r1_event;

// "TYPE tenant model replica hash adapter ts" per event, for exact comparison.
std::string describe(const pb::CacheEvent& e) {
  return pb::CacheEvent::Type_Name(e.type()) + " " + e.tenant_id() + " " + e.model_id() + " " +
         e.replica_id() + " " + e.prefix_hash() + " " + e.adapter_id() + " " +
         std::to_string(e.timestamp_us());
}

struct Events : ic::test::TwoCoreIndex {
  explicit Events(ic::service::EventStreamLimits limits = {}, ic::index::IndexConfig config = {})
      : TwoCoreIndex(config, kWall), fanout(index, limits) {
    ic::service::GrpcServiceOptions o;
    o.index = &index;
    o.events = &fanout;
    svc = std::make_unique<ic::test::ServiceFixture>(o);
  }
  std::int32_t call(const std::string& m, const google::protobuf::Message& req) {
    const auto id = svc->client.grpc_call(method(m), frame(req.SerializeAsString()));
    settle();
    return id;
  }
  // Runs mailboxes, zero-delay timers (the fan-out's flush) and the connection
  // until nothing moves.
  void settle() {
    for (int i = 0; i < 8; ++i) {
      link.run();
      link.advance(0);
      link.run();
      svc->run();
    }
  }
  std::int32_t subscribe(const pb::StreamEventsRequest& req) {
    return call("StreamCacheEvents", req);
  }
  std::vector<std::string> received(std::int32_t id) {
    std::vector<std::string> out;
    for (const auto& m : unframe(svc->client.streams[id].body)) {
      pb::CacheEvent e;
      REQUIRE(e.ParseFromString(m));
      out.push_back(describe(e));
    }
    return out;
  }

  ic::service::EventFanout fanout;
  std::unique_ptr<ic::test::ServiceFixture> svc;
};

std::string line(const std::string& type, const std::string& tenant, const std::string& hash,
                 std::int64_t ts, const std::string& model = "m") {
  return type + " " + tenant + " " + model + " r1 " + hash + "  " + std::to_string(ts);
}

}  // namespace

TEST_CASE_FIXTURE(Events, "every applied change of a scripted sequence, in order per tenant") {
  const std::string a = tenant_on(0);
  const std::string b = tenant_on(1);
  const auto id = subscribe(pb::StreamEventsRequest());
  CHECK(fanout.subscriptions(0) == 1);
  CHECK(fanout.subscriptions(1) == 1);
  CHECK(svc->client.streams[id].header(":status") == "200");  // registered everywhere
  CHECK(svc->client.streams[id].body.empty());

  call("ReportCacheState", update(a, "m", {"h1", "h2"}, 100));
  auto with_stats = update(b, "m", {"h3"}, 200);
  with_stats.mutable_stats()->set_hit_rate(0.5f);
  call("ReportCacheState", with_stats);
  call("PublishEvent", r1_event(pb::CacheEvent::PREFIX_EVICTED, a, "h1"));
  call("PublishEvent", r1_event(pb::CacheEvent::PREFIX_EVICTED, a, "nope"));  // nothing applied
  clock.wall = kWall + 5;
  call("PublishEvent", r1_event(pb::CacheEvent::REPLICA_UPDATED, b));
  call("PublishEvent", r1_event(pb::CacheEvent::ALL_CLEARED, b));
  call("PublishEvent", r1_event(pb::CacheEvent::ALL_CLEARED, b));         // nothing left: no event
  call("PublishEvent", r1_event(pb::CacheEvent::PREFIX_ADDED, a, "h9"));  // a no-op
  clock.wall = kWall + 9;
  CHECK(shard0.sweep_slice(kWall + 100LL * 60 * 1'000'000, 1024));  // h2 expires (TTL)
  settle();

  const std::vector<std::string> want = {
      line("PREFIX_ADDED", a, "h1", 100),     line("PREFIX_ADDED", a, "h2", 100),
      line("PREFIX_ADDED", b, "h3", 200),     line("REPLICA_UPDATED", b, "", 200),
      line("PREFIX_EVICTED", a, "h1", kWall), line("REPLICA_UPDATED", b, "", kWall + 5),
      line("ALL_CLEARED", b, "", kWall + 5),  line("PREFIX_EVICTED", a, "h2", kWall + 9),
  };
  CHECK(received(id) == want);
  CHECK_FALSE(svc->client.streams[id].closed);

  svc->client.cancel(id);
  settle();
  CHECK(fanout.subscriptions(0) == 0);
  CHECK(fanout.subscriptions(1) == 0);
}

TEST_CASE_FIXTURE(Events, "filters: tenant (registered on its owner only), model and types") {
  const std::string a = tenant_on(0);
  const std::string b = tenant_on(1);
  pb::StreamEventsRequest by_tenant;
  by_tenant.set_tenant_id(b);
  const auto t = subscribe(by_tenant);
  CHECK(fanout.subscriptions(0) == 0);
  CHECK(fanout.subscriptions(1) == 1);
  pb::StreamEventsRequest by_model;
  by_model.set_model_id("other");
  const auto m = subscribe(by_model);
  pb::StreamEventsRequest by_type;
  by_type.add_types(pb::CacheEvent::PREFIX_EVICTED);
  by_type.add_types(static_cast<pb::CacheEvent::Type>(42));  // unknown: ignored
  const auto e = subscribe(by_type);

  call("ReportCacheState", update(a, "m", {"x"}, 7));
  call("ReportCacheState", update(b, "m", {"y"}, 8));
  call("ReportCacheState", update(b, "other", {"z"}, 9));
  call("PublishEvent", r1_event(pb::CacheEvent::PREFIX_EVICTED, a, "x"));

  CHECK(received(t) == std::vector<std::string>{line("PREFIX_ADDED", b, "y", 8),
                                                line("PREFIX_ADDED", b, "z", 9, "other")});
  CHECK(received(m) == std::vector<std::string>{line("PREFIX_ADDED", b, "z", 9, "other")});
  CHECK(received(e) == std::vector<std::string>{line("PREFIX_EVICTED", a, "x", kWall)});
}

TEST_CASE_FIXTURE(Events, "a types filter naming no known type is INVALID_ARGUMENT") {
  pb::StreamEventsRequest req;
  req.add_types(pb::CacheEvent::TYPE_UNSPECIFIED);
  const auto id = subscribe(req);
  CHECK(svc->client.streams[id].grpc_status() == "3");
  CHECK(fanout.subscriptions(0) == 0);
}

TEST_CASE_FIXTURE(Events, "the server drains: the stream ends with OK and unregisters") {
  const auto id = subscribe(pb::StreamEventsRequest());
  svc->session->on_shutdown();
  settle();
  CHECK(svc->client.streams[id].trailer("grpc-status") == "0");
  CHECK(fanout.subscriptions(0) == 0);
  CHECK(fanout.subscriptions(1) == 0);
}

TEST_CASE("a subscriber over its queued-bytes bound ends with RESOURCE_EXHAUSTED") {
  ic::service::EventStreamLimits limits;
  limits.max_queued_bytes = 400;  // a few framed events
  Events f(limits);
  const std::string b = tenant_on(1);
  const auto id = f.subscribe(pb::StreamEventsRequest());
  // 40 prefixes in one ingest on core 1: one batch far over 400 bytes.
  std::vector<std::string> hashes;
  for (int i = 0; i < 40; ++i) hashes.push_back("hash-" + std::to_string(100 + i));
  f.call("ReportCacheState", update(b, "m", hashes, 1));
  const auto& s = f.svc->client.streams[id];
  CHECK(s.trailer("grpc-status") == "8");
  CHECK(s.trailer("grpc-message").find("event subscriber too slow") == 0);
  CHECK(f.fanout.subscriptions(0) == 0);
  CHECK(f.fanout.subscriptions(1) == 0);
  // What was delivered before the bound is a prefix of the sequence.
  const auto got = f.received(id);
  REQUIRE(got.size() < 40);
  for (std::size_t i = 0; i < got.size(); ++i)
    CHECK(got[i] == line("PREFIX_ADDED", b, hashes[i], 1));
  // Ingest goes on without it.
  f.call("ReportCacheState", update(b, "m", {"later"}, 2));
  CHECK(f.shard1.key_count() == 41);
}

TEST_CASE(
    "one subscriber over max_subscriptions is RESOURCE_EXHAUSTED; an ended one frees its place") {
  ic::service::EventStreamLimits limits;
  limits.max_subscriptions = 2;
  Events f(limits);
  const auto one = f.subscribe(pb::StreamEventsRequest());
  f.subscribe(pb::StreamEventsRequest());
  const auto third = f.subscribe(pb::StreamEventsRequest());
  CHECK(f.svc->client.streams[third].grpc_status() == "8");
  CHECK(f.svc->client.streams[third].grpc_message() == "too many event subscribers (max 2)");
  f.svc->client.cancel(one);
  f.settle();
  const auto fourth = f.subscribe(pb::StreamEventsRequest());
  CHECK(f.svc->client.streams[fourth].header(":status") == "200");
  CHECK_FALSE(f.svc->client.streams[fourth].closed);
  CHECK(f.fanout.subscriptions(0) == 2);
}

TEST_CASE("the global entry cap's victims are PREFIX_EVICTED events") {
  ic::index::IndexConfig config;
  config.max_entries = 2;
  Events f({}, config);
  const std::string a = tenant_on(0);
  const auto id = f.subscribe(pb::StreamEventsRequest());
  f.call("ReportCacheState", update(a, "m", {"old"}, 10));
  f.call("ReportCacheState", update(a, "m", {"mid", "new"}, 20));  // 3 > 2: "old" goes
  CHECK(f.received(id) == std::vector<std::string>{
                              line("PREFIX_ADDED", a, "old", 10),
                              line("PREFIX_ADDED", a, "mid", 20),
                              line("PREFIX_ADDED", a, "new", 20),
                              line("PREFIX_EVICTED", a, "old", kWall),
                          });
}
