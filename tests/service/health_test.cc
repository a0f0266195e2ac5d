#include <doctest/doctest.h>

#include <atomic>

#include "grpc/health/v1/health.pb.h"
#include "service_fixture.hh"

namespace hpb = ::grpc::health::v1;
using ic::test::frame;
using ic::test::ServiceFixture;
using ic::test::unframe;

namespace {
hpb::HealthCheckRequest for_service(std::string name) {
  hpb::HealthCheckRequest r;
  r.set_service(std::move(name));
  return r;
}
std::atomic<bool> g_ready{true};
ic::service::GrpcServiceOptions ready_options() {
  ic::service::GrpcServiceOptions o;
  o.ready = [] { return g_ready.load(); };
  return o;
}
}  // namespace

TEST_CASE_FIXTURE(ServiceFixture, "Check: served names are SERVING, unknown is NOT_FOUND") {
  for (const char* name : {"", "inferencecache.v1alpha1.InferenceCache"}) {
    CAPTURE(name);
    const auto id = call("/grpc.health.v1.Health/Check", for_service(name));
    CHECK(single<hpb::HealthCheckResponse>(id).status() == hpb::HealthCheckResponse::SERVING);
  }
  const auto id = call("/grpc.health.v1.Health/Check", for_service("nope.Service"));
  CHECK(client.streams[id].grpc_status() == "5");
  CHECK(client.streams[id].grpc_message() == "unknown service nope.Service");
}

TEST_CASE("Check follows readiness") {
  g_ready = false;
  ServiceFixture f(ready_options());
  const auto a = f.call("/grpc.health.v1.Health/Check", for_service(""));
  CHECK(f.single<hpb::HealthCheckResponse>(a).status() == hpb::HealthCheckResponse::NOT_SERVING);
  g_ready = true;
  const auto b = f.call("/grpc.health.v1.Health/Check", for_service(""));
  CHECK(f.single<hpb::HealthCheckResponse>(b).status() == hpb::HealthCheckResponse::SERVING);
}

TEST_CASE_FIXTURE(ServiceFixture, "Watch sends the status, stays open, ends at shutdown") {
  const auto id = call("/grpc.health.v1.Health/Watch", for_service(""));
  auto msgs = unframe(client.streams[id].body);
  REQUIRE(msgs.size() == 1);
  hpb::HealthCheckResponse r;
  REQUIRE(r.ParseFromString(msgs[0]));
  CHECK(r.status() == hpb::HealthCheckResponse::SERVING);
  CHECK_FALSE(client.streams[id].closed);
  CHECK_FALSE(session->idle());

  const auto unknown = call("/grpc.health.v1.Health/Watch", for_service("x.Y"));
  msgs = unframe(client.streams[unknown].body);
  REQUIRE(msgs.size() == 1);
  REQUIRE(r.ParseFromString(msgs[0]));
  CHECK(r.status() == hpb::HealthCheckResponse::SERVICE_UNKNOWN);

  session->on_shutdown();
  run();
  msgs = unframe(client.streams[id].body);
  REQUIRE(msgs.size() == 2);
  REQUIRE(r.ParseFromString(msgs[1]));
  CHECK(r.status() == hpb::HealthCheckResponse::NOT_SERVING);
  CHECK(client.streams[id].trailer("grpc-status") == "0");
  CHECK(client.streams[id].closed);
  CHECK(client.goaway_received);
  CHECK(session->idle());
  CHECK(conn.closed);
}

namespace {
// The statuses Watch stream `id` carried so far.
std::vector<hpb::HealthCheckResponse::ServingStatus> statuses(ServiceFixture& f, std::int32_t id) {
  std::vector<hpb::HealthCheckResponse::ServingStatus> out;
  for (const auto& m : unframe(f.client.streams[id].body)) {
    hpb::HealthCheckResponse r;
    REQUIRE(r.ParseFromString(m));
    out.push_back(r.status());
  }
  return out;
}
}  // namespace

TEST_CASE("Watch sends the current status, then only changes of readiness") {
  using S = hpb::HealthCheckResponse;
  g_ready = false;  // starting up
  ServiceFixture f(ready_options());
  const auto id = f.call("/grpc.health.v1.Health/Watch", for_service(""));
  CHECK(statuses(f, id) == std::vector{S::NOT_SERVING});
  f.timers.advance(ic::service::kWatchPollUs);  // unchanged: nothing sent
  f.run();
  CHECK(statuses(f, id) == std::vector{S::NOT_SERVING});
  g_ready = true;  // every core serves
  f.timers.advance(ic::service::kWatchPollUs - 1);
  f.run();
  CHECK(statuses(f, id) == std::vector{S::NOT_SERVING});
  f.timers.advance(1);
  f.run();
  CHECK(statuses(f, id) == std::vector{S::NOT_SERVING, S::SERVING});
  g_ready = false;  // draining: readiness drops before the GOAWAY
  f.timers.advance(ic::service::kWatchPollUs);
  f.run();
  CHECK(statuses(f, id) == std::vector{S::NOT_SERVING, S::SERVING, S::NOT_SERVING});
  f.session->on_shutdown();  // NOT_SERVING was the last status: not repeated
  f.run();
  CHECK(statuses(f, id) == std::vector{S::NOT_SERVING, S::SERVING, S::NOT_SERVING});
  CHECK(f.client.streams[id].trailer("grpc-status") == "0");
  CHECK(f.timers.pending.empty());  // no Watch left: the poll timer stopped
  g_ready = true;
}

TEST_CASE("Watch: a cancelled stream leaves no poll timer behind") {
  ServiceFixture f(ready_options());
  const auto id = f.call("/grpc.health.v1.Health/Watch", for_service(""));
  CHECK(f.timers.pending.size() == 1);
  f.client.cancel(id);
  f.run();
  f.timers.advance(ic::service::kWatchPollUs);
  CHECK(f.timers.pending.empty());
}
