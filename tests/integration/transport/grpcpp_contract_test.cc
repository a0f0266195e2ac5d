// grpc++ (Debian libgrpc++-dev, a client nobody here wrote) against the real
// inferencecache-server on loopback: every RPC of the contract, the health
// service and both reflection services (docs/contract.md "RPCs", "Identity").
// Assertions hold on a cold index (docs/lookup.md step 7: "index globally
// empty → none (cold start stays NO_HINT)"), so each test starts its own
// server and writes only the reserved tenant, which the index drops.
#include <doctest/doctest.h>
#include <google/protobuf/descriptor.pb.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "support/builders.hh"
#include "support/grpc_channel.hh"
#include "support/server_process.hh"
#include "support/text.hh"

namespace pb = inferencecache::v1alpha1;
namespace health = grpc::health::v1;
using ic::itest::call_unary;
using ic::itest::deadline_in;
using Stub = pb::InferenceCache::Stub;
using ic::itest::numbered;
using namespace std::chrono_literals;

namespace {

using ic::test::kProbeTenant;
constexpr char kServiceName[] = "inferencecache.v1alpha1.InferenceCache";

// One server and a connected grpc++ channel; the test ends with stop().
using Served = ic::itest::GrpcServed;

// A request a gateway would send: scope, an exact prefix hash and an adapter.
pb::LookupRouteRequest gateway_request() {
  pb::LookupRouteRequest req = ic::test::gateway_request();
  req.set_prefix_token_count(64);
  return req;
}

// With stats, so the update also reports the replica's hit rate.
pb::CacheStateUpdate probe_update(int i) {
  pb::CacheStateUpdate u = ic::test::numbered_probe_update(i);
  u.mutable_stats()->set_replica_id(u.replica_id());
  u.mutable_stats()->set_hit_rate(0.5f);
  return u;
}

}  // namespace

TEST_CASE("LookupRoute on a cold index answers NO_HINT with no replica scores") {
  Served s;
  SUBCASE("a gateway request: adapter_id echoed, no token_ids") {
    pb::LookupRouteResponse resp;
    REQUIRE(call_unary(*s.stub, &Stub::LookupRoute, gateway_request(), &resp).ok());
    CHECK(resp.reason_code() == "NO_HINT");
    CHECK(resp.replica_scores_size() == 0);
    CHECK(resp.lookup_latency_us() >= 0);
    CHECK(resp.token_ids_size() == 0);
    CHECK(resp.adapter_id() == "lora-7");
  }
  SUBCASE("an empty request") {
    pb::LookupRouteResponse resp;
    REQUIRE(call_unary(*s.stub, &Stub::LookupRoute, pb::LookupRouteRequest(), &resp).ok());
    CHECK(resp.reason_code() == "NO_HINT");
    CHECK(resp.replica_scores_size() == 0);
  }
  SUBCASE("the reserved tenant: NO_HINT with latency 0 (docs/lookup.md step 1)") {
    pb::LookupRouteRequest req = gateway_request();
    req.set_tenant_id(kProbeTenant);
    pb::LookupRouteResponse resp;
    REQUIRE(call_unary(*s.stub, &Stub::LookupRoute, req, &resp).ok());
    CHECK(resp.reason_code() == "NO_HINT");
    CHECK(resp.replica_scores_size() == 0);
    CHECK(resp.lookup_latency_us() == 0);
  }
  CHECK(s.stop() == 0);
}

TEST_CASE("ReportCacheState acks a client stream of 100 updates, and one of none") {
  Served s;
  std::vector<pb::CacheStateUpdate> updates;
  for (int i = 0; i < 100; ++i) updates.push_back(probe_update(i));
  for (const auto& stream : {updates, std::vector<pb::CacheStateUpdate>{}}) {
    CAPTURE(stream.size());
    pb::Ack ack;
    const grpc::Status st = ic::itest::report_cache_state(*s.stub, stream, &ack);
    REQUIRE(st.error_code() == grpc::StatusCode::OK);
    CHECK(ack.accepted());
  }
  CHECK(s.stop() == 0);
}

TEST_CASE("PublishEvent acks every decodable event") {
  Served s;
  for (auto type : {pb::CacheEvent::TYPE_UNSPECIFIED, pb::CacheEvent::PREFIX_ADDED,
                    pb::CacheEvent::PREFIX_EVICTED, pb::CacheEvent::REPLICA_UPDATED,
                    pb::CacheEvent::ALL_CLEARED}) {
    CAPTURE(type);
    pb::CacheEvent ev;
    ev.set_type(type);
    ev.set_replica_id("replica-0");
    ev.set_model_id("llama-3-8b");
    ev.set_tenant_id(kProbeTenant);
    ev.set_prefix_hash(std::string(8, '\x11'));
    pb::Ack ack;
    REQUIRE(call_unary(*s.stub, &Stub::PublishEvent, ev, &ack).ok());
    CHECK(ack.accepted());
  }
  CHECK(s.stop() == 0);
}

TEST_CASE("GetCacheState on a cold index is empty") {
  Served s;
  pb::GetCacheStateRequest req;
  req.set_model_id("llama-3-8b");
  req.set_tenant_id("team-a");
  pb::GetCacheStateResponse resp;
  REQUIRE(call_unary(*s.stub, &Stub::GetCacheState, req, &resp).ok());
  CHECK(resp.replicas_size() == 0);
  CHECK(resp.summary().total_prefixes() == 0);
  CHECK(resp.summary().hot_prefixes() == 0);
  CHECK(s.stop() == 0);
}

TEST_CASE("RenderTemplate of an unknown template and LookupPDRoute's contract default") {
  Served s;
  {
    pb::RenderTemplateRequest req;
    req.set_template_ref("chat-v1");
    (*req.mutable_variables())["name"] = "world";
    req.set_tenant_id("team-a");
    pb::RenderTemplateResponse resp;
    REQUIRE(call_unary(*s.stub, &Stub::RenderTemplate, req, &resp).ok());
    // No template set (docs/templates.md): a reason code, never a gRPC error.
    CHECK(resp.ShortDebugString() ==
          R"(tenant_namespace: "team-a" reason_code: "TEMPLATE_NOT_FOUND")");
  }
  {
    pb::LookupPDRouteRequest req;
    req.set_model_id("llama-3-8b");
    req.set_tenant_id("team-a");
    req.set_prefix_hash("abc");
    pb::LookupPDRouteResponse resp;
    REQUIRE(call_unary(*s.stub, &Stub::LookupPDRoute, req, &resp).ok());
    CHECK(resp.ShortDebugString() == R"(reason_code: "NO_HINT")");
  }
  CHECK(s.stop() == 0);
}

TEST_CASE("grpc.health.v1.Health: SERVING for the server and the service, NOT_FOUND otherwise") {
  Served s;
  auto stub = health::Health::NewStub(s.channel);
  for (const std::string service : {"", kServiceName}) {
    CAPTURE(service);
    health::HealthCheckRequest req;
    req.set_service(service);
    health::HealthCheckResponse resp;
    REQUIRE(call_unary(*stub, &health::Health::Stub::Check, req, &resp).ok());
    CHECK(resp.status() == health::HealthCheckResponse::SERVING);
  }
  {
    // grpc/grpc doc/health-checking.md: an unknown service is NOT_FOUND.
    health::HealthCheckRequest req;
    req.set_service("no.such.Service");
    health::HealthCheckResponse resp;
    CHECK(call_unary(*stub, &health::Health::Stub::Check, req, &resp).error_code() ==
          grpc::StatusCode::NOT_FOUND);
  }
  {
    // Watch sends the current status first and keeps the stream open.
    ic::itest::HealthWatch watch(*stub);
    CHECK(watch.next() == health::HealthCheckResponse::SERVING);
    watch.ctx.TryCancel();
    CHECK(watch.reader->Finish().error_code() == grpc::StatusCode::CANCELLED);
  }
  stub.reset();
  CHECK(s.stop() == 0);
}

// The two reflection versions share message shapes under different packages.
struct ReflectionV1 {
  using Service = grpc::reflection::v1::ServerReflection;
  using Request = grpc::reflection::v1::ServerReflectionRequest;
  using Response = grpc::reflection::v1::ServerReflectionResponse;
};
struct ReflectionV1alpha {
  using Service = grpc::reflection::v1alpha::ServerReflection;
  using Request = grpc::reflection::v1alpha::ServerReflectionRequest;
  using Response = grpc::reflection::v1alpha::ServerReflectionResponse;
};

// Lists services and fetches the contract's file descriptor through one
// reflection version, then asks for a symbol that does not exist.
template <class Reflection>
void check_reflection(const std::shared_ptr<grpc::Channel>& channel) {
  using Request = typename Reflection::Request;
  using Response = typename Reflection::Response;
  auto stub = Reflection::Service::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline_in(5s));
  auto stream = stub->ServerReflectionInfo(&ctx);
  // One request on the stream and the server's answer to it.
  const auto ask = [&stream](const Request& request) {
    REQUIRE(stream->Write(request));
    Response answer;
    REQUIRE(stream->Read(&answer));
    return answer;
  };

  Request list;
  list.set_list_services("*");
  const Response resp = ask(list);
  REQUIRE(resp.has_list_services_response());
  std::set<std::string> names;
  for (const auto& svc : resp.list_services_response().service()) names.insert(svc.name());
  CHECK(names.count(kServiceName) == 1);
  CHECK(names.count("grpc.health.v1.Health") == 1);
  CHECK(names.count("grpc.reflection.v1.ServerReflection") == 1);
  CHECK(names.count("grpc.reflection.v1alpha.ServerReflection") == 1);

  Request symbol;
  symbol.set_file_containing_symbol(kServiceName);
  const Response file = ask(symbol);
  REQUIRE(file.has_file_descriptor_response());
  bool found = false;
  for (const auto& bytes : file.file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto fd;
    REQUIRE(fd.ParseFromString(bytes));
    if (fd.name() != "inferencecache/v1alpha1/inferencecache.proto") continue;
    found = true;
    CHECK(fd.package() == "inferencecache.v1alpha1");
    REQUIRE(fd.service_size() == 1);
    std::vector<std::string> methods;
    for (const auto& m : fd.service(0).method()) methods.push_back(m.name());
    std::sort(methods.begin(), methods.end());
    CHECK(methods == std::vector<std::string>{"GetCacheState", "LookupPDRoute", "LookupRoute",
                                              "PublishEvent", "RenderTemplate", "ReportCacheState",
                                              "StreamCacheEvents", "StreamMetrics"});
  }
  CHECK(found);

  Request unknown;
  unknown.set_file_containing_symbol("no.such.Symbol");
  const Response err = ask(unknown);
  REQUIRE(err.has_error_response());
  CHECK(err.error_response().error_code() == static_cast<int>(grpc::StatusCode::NOT_FOUND));

  REQUIRE(stream->WritesDone());
  CHECK(stream->Finish().error_code() == grpc::StatusCode::OK);
}

TEST_CASE("server reflection v1 and v1alpha list the services and describe the contract") {
  Served s;
  SUBCASE("v1") { check_reflection<ReflectionV1>(s.channel); }
  SUBCASE("v1alpha") { check_reflection<ReflectionV1alpha>(s.channel); }
  CHECK(s.stop() == 0);
}
