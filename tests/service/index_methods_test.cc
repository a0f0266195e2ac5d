#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "index/partition.hh"
#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "service_fixture.hh"
#include "sharding/sharded_index.hh"
#include "two_core_index.hh"

namespace pb = ::inferencecache::v1alpha1;
using ic::test::frame;
using ic::test::unframe;

namespace {

constexpr std::string_view kPrefix = "/inferencecache.v1alpha1.InferenceCache/";
std::string method(std::string_view m) { return std::string(kPrefix) + std::string(m); }

// First tenant name "tenant-N" owned by `core` of 2.
std::string tenant_on(unsigned core) {
  for (int i = 0;; ++i) {
    std::string t = "tenant-" + std::to_string(i);
    if (ic::index::owner_core(t, 2) == core) return t;
  }
}

pb::CacheStateUpdate update(const std::string& tenant, const std::string& hash) {
  pb::CacheStateUpdate u;
  u.set_replica_id("r1");
  u.set_model_id("m");
  u.set_tenant_id(tenant);
  u.set_hash_scheme("s");
  auto* p = u.add_prefixes();
  p->set_prefix_hash(hash);
  p->set_token_count(128);
  return u;
}

pb::LookupRouteRequest lookup(const std::string& tenant, const std::string& hash) {
  pb::LookupRouteRequest r;
  r.set_model_id("m");
  r.set_tenant_id(tenant);
  r.set_hash_scheme("s");
  r.set_prefix_hash(hash);
  return r;
}

// Two cores, the connection on core 0.
struct Routed : ic::test::TwoCoreIndex {
  Routed() {
    ic::service::GrpcServiceOptions o;
    o.index = &index;
    svc = std::make_unique<ic::test::ServiceFixture>(o);
  }
  // Moves both manual clocks (the gRPC timers, the index clock, the link).
  void advance(std::int64_t us) {
    clock.mono += us;
    svc->timers.advance(us);
    link.advance(us);
  }
  std::int32_t start(const std::string& m, const google::protobuf::Message& req,
                     std::vector<std::pair<std::string, std::string>> extra = {}) {
    const auto id =
        svc->client.grpc_call(method(m), frame(req.SerializeAsString()), true, std::move(extra));
    svc->run();
    return id;
  }
  // Runs the cores' mailboxes, then the connection.
  void settle() {
    link.run();
    svc->run();
  }
  template <typename T>
  T answer(std::int32_t id) {
    return svc->single<T>(id);
  }

  std::unique_ptr<ic::test::ServiceFixture> svc;
};

}  // namespace

TEST_CASE("tenants are owned by the partition hash") {
  CHECK(ic::index::owner_core(tenant_on(0), 2) == 0);
  CHECK(ic::index::owner_core(tenant_on(1), 2) == 1);
}

TEST_CASE_FIXTURE(Routed,
                  "remote tenant: ingest is acked after it was applied, then LookupRoute matches") {
  const std::string t = tenant_on(1);
  const auto report = svc->client.grpc_call(method("ReportCacheState"),
                                            frame(update(t, "abc").SerializeAsString()));
  svc->run();
  CHECK(link.queued(1) == 2);  // the ingest, then the half-close barrier, to core 1
  CHECK(svc->client.streams[report].body.empty());
  link.run_core(1);  // ingest applied; the barrier posts "done" back to core 0
  CHECK(shard1.key_count() == 1);
  CHECK(shard0.key_count() == 0);
  CHECK(link.queued(0) == 1);
  svc->run();
  CHECK(svc->client.streams[report].body.empty());  // no Ack before core 0 saw "done"
  settle();
  CHECK(answer<pb::Ack>(report).accepted());

  const auto id = start("LookupRoute", lookup(t, "abc"));
  CHECK(svc->client.streams[id].body.empty());  // waiting for core 1
  settle();
  const auto resp = answer<pb::LookupRouteResponse>(id);
  CHECK(resp.reason_code() == "PREFIX_MATCH");
  REQUIRE(resp.replica_scores_size() == 1);
  CHECK(resp.replica_scores(0).replica_id() == "r1");
  CHECK(resp.replica_scores(0).matched_tokens() == 128);
  CHECK(svc->client.streams[id].trailer("grpc-status") == "0");
}

TEST_CASE_FIXTURE(Routed, "local tenant: answered inline without any post") {
  const std::string t = tenant_on(0);
  const auto report = start("ReportCacheState", update(t, "xyz"));
  CHECK(answer<pb::Ack>(report).accepted());
  const auto id = start("LookupRoute", lookup(t, "xyz"));
  CHECK(answer<pb::LookupRouteResponse>(id).reason_code() == "PREFIX_MATCH");
  pb::GetCacheStateRequest g;
  g.set_tenant_id(t);
  g.set_model_id("m");
  const auto gs = start("GetCacheState", g);
  CHECK(answer<pb::GetCacheStateResponse>(gs).summary().total_prefixes() == 1);
  CHECK(link.posts == 0);
}

// The same state, then one LookupRoute: its response body (gRPC-framed).
std::string lookup_body(const std::string& request_bytes) {
  Routed r;
  const std::string t = tenant_on(0);
  CHECK(r.answer<pb::Ack>(r.start("ReportCacheState", update(t, "xyz"))).accepted());
  const auto id = r.svc->client.grpc_call(method("LookupRoute"), frame(request_bytes), true);
  r.svc->run();
  CHECK(r.svc->client.streams[id].trailer("grpc-status") == "0");
  CHECK(r.link.posts == 0);
  return r.svc->client.streams[id].body;
}

TEST_CASE("local LookupRoute: the views' answer is byte for byte protobuf's") {
  const std::string plain = lookup(tenant_on(0), "xyz").SerializeAsString();  // views
  const std::string extended = plain + std::string("\x78\x01", 2);  // + unknown field 15: protobuf
  const std::string body = lookup_body(plain);
  pb::LookupRouteResponse resp;
  REQUIRE(unframe(body).size() == 1);
  REQUIRE(resp.ParseFromString(unframe(body)[0]));
  CHECK(resp.reason_code() == "PREFIX_MATCH");
  CHECK(resp.replica_scores_size() == 1);
  CHECK(body == lookup_body(extended));
}

TEST_CASE_FIXTURE(Routed, "local LookupRoute: two messages, none, or undecodable bytes") {
  const std::string t = tenant_on(0);
  const std::string one = frame(lookup(t, "xyz").SerializeAsString());
  const auto two = svc->client.grpc_call(method("LookupRoute"), one + one, true);
  const auto none = svc->client.grpc_call(method("LookupRoute"), "", true);
  const auto bad = svc->client.grpc_call(method("LookupRoute"),
                                         frame("\x0a\x05"
                                               "ab"),
                                         true);
  svc->run();
  CHECK(svc->client.streams[two].grpc_status() == "13");
  CHECK(svc->client.streams[two].grpc_message() ==
        "more than one request message for a unary request");
  CHECK(svc->client.streams[none].grpc_status() == "13");
  CHECK(svc->client.streams[none].grpc_message() == "no request message before half-close");
  CHECK(svc->client.streams[bad].grpc_status() == "3");
  CHECK(svc->client.streams[bad].grpc_message() ==
        "request message does not decode as inferencecache.v1alpha1.LookupRouteRequest");
}

TEST_CASE_FIXTURE(Routed, "remote GetCacheState and PublishEvent go through the owner") {
  const std::string t = tenant_on(1);
  start("ReportCacheState", update(t, "h1"));
  settle();
  pb::GetCacheStateRequest g;
  g.set_tenant_id(t);
  g.set_model_id("m");
  auto gs = start("GetCacheState", g);
  settle();
  CHECK(answer<pb::GetCacheStateResponse>(gs).summary().total_prefixes() == 1);

  pb::CacheEvent ev;
  ev.set_type(pb::CacheEvent::PREFIX_EVICTED);
  ev.set_replica_id("r1");
  ev.set_model_id("m");
  ev.set_tenant_id(t);
  ev.set_prefix_hash("h1");
  const auto e = start("PublishEvent", ev);
  CHECK(svc->client.streams[e].body.empty());
  settle();
  CHECK(answer<pb::Ack>(e).accepted());
  CHECK(shard1.entry_count() == 0);
  const auto id = start("LookupRoute", lookup(t, "h1"));
  settle();
  const auto resp = answer<pb::LookupRouteResponse>(id);
  CHECK(resp.reason_code() == "NO_HINT");
  CHECK(resp.replica_scores_size() == 0);
}

TEST_CASE_FIXTURE(Routed,
                  "owner mailbox full: LookupRoute fails open, the others are RESOURCE_EXHAUSTED") {
  const std::string t = tenant_on(1);
  link.capacity[1] = 0;
  const auto id = start("LookupRoute", lookup(t, "abc"));
  const auto resp = answer<pb::LookupRouteResponse>(id);
  CHECK(resp.reason_code() == "NO_HINT");
  CHECK(svc->client.streams[id].trailer("grpc-status") == "0");

  const auto report = start("ReportCacheState", update(t, "abc"));
  CHECK(svc->client.streams[report].grpc_status() == "8");
  CHECK(svc->client.streams[report].grpc_message() == "index core 1 is overloaded (mailbox full)");
  pb::CacheEvent ev;
  ev.set_tenant_id(t);
  CHECK(svc->client.streams[start("PublishEvent", ev)].grpc_status() == "8");
  pb::GetCacheStateRequest g;
  g.set_tenant_id(t);
  CHECK(svc->client.streams[start("GetCacheState", g)].grpc_status() == "8");
  CHECK(link.rejected == 4);
}

TEST_CASE_FIXTURE(Routed,
                  "a late owner answer loses to the grpc-timeout guard: TIMEOUT, then a no-op") {
  const std::string t = tenant_on(1);
  const auto id = start("LookupRoute", lookup(t, "abc"), {{"grpc-timeout", "10m"}});
  advance(9'999);
  svc->run();
  CHECK(svc->client.streams[id].body.empty());
  advance(1);
  svc->run();
  const auto resp = answer<pb::LookupRouteResponse>(id);
  CHECK(resp.reason_code() == "TIMEOUT");
  CHECK(resp.replica_scores_size() == 0);
  CHECK(resp.lookup_latency_us() == 10'000);
  CHECK(svc->client.streams[id].trailer("grpc-status") == "0");
  settle();  // the owner's answer arrives for a finished call
  CHECK(unframe(svc->client.streams[id].body).size() == 1);
  CHECK(link.pending_timers() == 0);
}

TEST_CASE_FIXTURE(Routed, "the owner's answer cancels the guard timer") {
  const std::string t = tenant_on(1);
  const auto id = start("LookupRoute", lookup(t, "abc"), {{"grpc-timeout", "1S"}});
  CHECK(link.pending_timers() == 1);
  settle();
  CHECK(answer<pb::LookupRouteResponse>(id).reason_code() == "NO_HINT");
  CHECK(link.pending_timers() == 0);
}

TEST_CASE_FIXTURE(Routed, "a stream reset before the owner answers leaks nothing") {
  const std::string t = tenant_on(1);
  const auto id = start("LookupRoute", lookup(t, "abc"));
  svc->client.cancel(id);
  svc->run();
  CHECK(svc->session->idle());
  settle();
  CHECK(svc->client.streams[id].body.empty());
}

TEST_CASE_FIXTURE(Routed, "RST mid ReportCacheState keeps every message fully received") {
  const std::string t = tenant_on(1);
  const std::string third = frame(update(t, "c").SerializeAsString());
  const auto id =
      svc->client.grpc_call(method("ReportCacheState"),
                            frame(update(t, "a").SerializeAsString()) +
                                frame(update(t, "b").SerializeAsString()) + third.substr(0, 7),
                            false);
  svc->run();
  svc->client.cancel(id);
  svc->run();
  settle();
  CHECK(shard1.key_count() == 2);
  CHECK(svc->client.streams[id].body.empty());
}

TEST_CASE_FIXTURE(Routed, "an answer that meets a full mailbox is retried, not lost") {
  const std::string t = tenant_on(1);
  const auto id = start("LookupRoute", lookup(t, "abc"));
  link.capacity[0] = 0;
  link.run_core(1);  // the answer's post back to core 0 fails
  CHECK(link.pending_timers() == 1);
  link.capacity[0] = 1u << 20;
  advance(ic::runtime::Wait{}.retry_us);
  settle();
  CHECK(answer<pb::LookupRouteResponse>(id).reason_code() == "NO_HINT");
}

TEST_CASE_FIXTURE(Routed, "reserved probe tenant answers NO_HINT and is never stored") {
  const std::string probe = "inferencecache.io/probe";
  start("ReportCacheState", update(probe, "p"));
  settle();
  CHECK(shard0.key_count() + shard1.key_count() == 0);
  const auto id = start("LookupRoute", lookup(probe, "p"));
  settle();
  const auto resp = answer<pb::LookupRouteResponse>(id);
  CHECK(resp.reason_code() == "NO_HINT");
  CHECK(resp.lookup_latency_us() == 0);
}
