#include <doctest/doctest.h>

#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "service_fixture.hh"

namespace pb = ::inferencecache::v1alpha1;
using ic::test::frame;
using ic::test::ServiceFixture;
using ic::test::unframe;

namespace {
constexpr std::string_view kPrefix = "/inferencecache.v1alpha1.InferenceCache/";
std::string method(std::string_view m) { return std::string(kPrefix) + std::string(m); }
}  // namespace

TEST_CASE_FIXTURE(ServiceFixture, "LookupRoute default answers NO_HINT with no replicas") {
  pb::LookupRouteRequest req;
  req.set_model_id("m");
  req.set_tenant_id("t");
  const auto id = call(method("LookupRoute"), req);
  CHECK(client.streams[id].trailer("grpc-status") == "0");
  const auto resp = single<pb::LookupRouteResponse>(id);
  CHECK(resp.reason_code() == "NO_HINT");
  CHECK(resp.replica_scores_size() == 0);
}

TEST_CASE_FIXTURE(ServiceFixture, "ReportCacheState drains and acks on half-close") {
  pb::CacheStateUpdate u;
  u.set_replica_id("r1");
  const std::string f = frame(u.SerializeAsString());
  const auto id = client.grpc_call(method("ReportCacheState"), f + f, false);
  run();
  CHECK_FALSE(client.streams[id].closed);
  client.send(id, f, true);
  run();
  const auto ack = single<pb::Ack>(id);
  CHECK(ack.accepted());
  CHECK(ack.reason_code().empty());
  CHECK(client.streams[id].trailer("grpc-status") == "0");
}

TEST_CASE_FIXTURE(ServiceFixture,
                  "ReportCacheState with an undecodable message is INVALID_ARGUMENT") {
  const auto id =
      client.grpc_call(method("ReportCacheState"), frame(std::string("\x0a\x09short", 7)));
  run();
  CHECK(client.streams[id].grpc_status() == "3");
}

TEST_CASE_FIXTURE(ServiceFixture,
                  "PublishEvent, GetCacheState, RenderTemplate, LookupPDRoute defaults") {
  pb::CacheEvent ev;
  ev.set_type(pb::CacheEvent::PREFIX_EVICTED);
  const auto e = call(method("PublishEvent"), ev);
  CHECK(single<pb::Ack>(e).accepted());

  pb::GetCacheStateRequest g;
  g.set_tenant_id("t");
  const auto gs = call(method("GetCacheState"), g);
  const auto state = single<pb::GetCacheStateResponse>(gs);
  CHECK(state.replicas_size() == 0);
  CHECK_FALSE(state.has_summary());
  CHECK(client.streams[gs].trailer("grpc-status") == "0");

  const auto rt = call(method("RenderTemplate"), pb::RenderTemplateRequest());
  const auto rendered = single<pb::RenderTemplateResponse>(rt);
  CHECK(rendered.reason_code() == "OK");
  CHECK(rendered.rendered_prompt().empty());

  const auto pd = call(method("LookupPDRoute"), pb::LookupPDRouteRequest());
  const auto pdr = single<pb::LookupPDRouteResponse>(pd);
  CHECK(pdr.reason_code() == "NO_HINT");
  CHECK(pdr.prefill_replica_id().empty());
}

TEST_CASE_FIXTURE(ServiceFixture, "StreamCacheEvents and StreamMetrics close at once with OK") {
  const auto a = call(method("StreamCacheEvents"), pb::StreamEventsRequest());
  const auto b = call(method("StreamMetrics"), pb::StreamMetricsRequest());
  for (auto id : {a, b}) {
    CHECK(client.streams[id].closed);
    CHECK(client.streams[id].body.empty());
    CHECK(client.streams[id].grpc_status() == "0");
  }
}

TEST_CASE_FIXTURE(ServiceFixture, "unknown InferenceCache method is UNIMPLEMENTED") {
  const auto id = call(method("Nope"), pb::Ack());
  CHECK(client.streams[id].grpc_status() == "12");
}
