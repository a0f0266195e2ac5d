// Where the real server serves the endpoint picker (docs/gateway.md "Flags"):
// on the gRPC port by default; with --gateway-listen on a listener of its own
// that serves ext_proc, health and reflection only (InferenceCache stays on
// the gRPC port); with --gateway off nowhere.

#include <doctest/doctest.h>

#include <string>
#include <utility>

#include "envoy/service/ext_proc/v3/external_processor.pb.h"
#include "grpc/health/v1/health.pb.h"
#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "support/grpc_frame.hh"
#include "support/h2_client.hh"
#include "support/server_process.hh"

using namespace ic::itest;
using namespace std::chrono_literals;
namespace xp = envoy::service::ext_proc::v3;

namespace {

constexpr std::string_view kProcess = "/envoy.service.ext_proc.v3.ExternalProcessor/Process";
constexpr std::string_view kLookup = "/inferencecache.v1alpha1.InferenceCache/LookupRoute";

// One ext_proc stream on `port`: the headers of a body-less request (picked
// on its headers), half-closed. "503" when the picker answered it (no
// endpoint known), else "grpc <status>".
std::string process(std::uint16_t port) {
  H2Client client(port);
  xp::ProcessingRequest r;
  auto* h = r.mutable_request_headers();
  auto* path = h->mutable_headers()->add_headers();
  path->set_key(":path");
  path->set_raw_value("/v1/models");
  h->set_end_of_stream(true);
  const int32_t id = client.start(kProcess, BodyPlan{frame_message(r)});
  const H2Response& answer = client.wait(id);
  if (answer.grpc_status() != kOk)
    return "grpc " + std::to_string(answer.grpc_status().value_or(-1));
  const auto out = parse_single<xp::ProcessingResponse>(answer.body);
  return out.has_immediate_response()
             ? std::to_string(static_cast<int>(out.immediate_response().status().code()))
             : "no immediate response";
}

// The endpoint an ext_proc stream on `port` picks for a chat request of
// `tenant` (the x-tenant-id header) naming model "m", in buffered body mode:
// the x-gateway-destination-endpoint header set on the body's response,
// "503" when the picker answered so, else what went wrong.
std::string picked_for(
    std::uint16_t port, const std::string& tenant,
    const std::string& json = R"({"model":"m","messages":[{"role":"user","content":"hi"}]})") {
  H2Client client(port);
  xp::ProcessingRequest headers;
  auto* h = headers.mutable_request_headers()->mutable_headers();
  for (const auto& [key, value] :
       {std::pair<std::string, std::string>{":path", "/v1/chat/completions"},
        {"x-tenant-id", tenant}}) {
    auto* kv = h->add_headers();
    kv->set_key(key);
    kv->set_raw_value(value);
  }
  xp::ProcessingRequest body;
  body.mutable_request_body()->set_body(json);
  body.mutable_request_body()->set_end_of_stream(true);
  const H2Response& answer =
      client.wait(client.start(kProcess, BodyPlan{frame_message(headers) + frame_message(body)}));
  if (answer.grpc_status() != kOk)
    return "grpc " + std::to_string(answer.grpc_status().value_or(-1));
  for (const std::string& part : unframe(answer.body)) {
    xp::ProcessingResponse out;
    if (!out.ParseFromString(part)) return "a response that does not parse";
    if (out.has_immediate_response())
      return std::to_string(static_cast<int>(out.immediate_response().status().code()));
    for (const auto& m : out.request_body().response().header_mutation().set_headers())
      if (m.header().key() == "x-gateway-destination-endpoint") return m.header().raw_value();
  }
  return "no endpoint header";
}

// `replica` reports idle stats for (`tenant`, model "m") over ReportCacheState; its grpc-status.
int report_stats(std::uint16_t port, const std::string& tenant, const std::string& replica) {
  H2Client client(port);
  inferencecache::v1alpha1::CacheStateUpdate u;
  u.set_tenant_id(tenant);
  u.set_model_id("m");
  u.set_replica_id(replica);
  u.mutable_stats()->set_pressure(0.0f);
  return client.wait(client.start(method_path("ReportCacheState"), BodyPlan{frame_message(u)}))
      .grpc_status()
      .value_or(-1);
}

// grpc-status of a LookupRoute on `port`.
int lookup(std::uint16_t port) {
  H2Client client(port);
  inferencecache::v1alpha1::LookupRouteRequest r;
  r.set_tenant_id("t");
  r.set_model_id("m");
  r.set_prefix_hash("h");
  r.set_prefix_token_count(16);
  return client.wait(client.start(kLookup, BodyPlan{frame_message(r)})).grpc_status().value_or(-1);
}

std::string health(std::uint16_t port, const std::string& service) {
  H2Client client(port);
  grpc::health::v1::HealthCheckRequest r;
  r.set_service(service);
  const H2Response& answer =
      client.wait(client.start(kHealthCheckPath, BodyPlan{frame_message(r)}));
  if (answer.grpc_status() != kOk)
    return "grpc " + std::to_string(answer.grpc_status().value_or(-1));
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
      parse_single<grpc::health::v1::HealthCheckResponse>(answer.body).status());
}

}  // namespace

TEST_CASE("the picker on the gRPC port by default") {
  ServerProcess server;
  CHECK(process(server.grpc_port()) == "503");
  CHECK(lookup(server.grpc_port()) == kOk);
  CHECK(server.stop() == 0);
}

TEST_CASE("--gateway-listen: the picker on its own listener, InferenceCache on the gRPC port") {
  const std::uint16_t port = free_loopback_port();
  ServerOptions o;
  o.extra_args = {"--gateway-listen", "127.0.0.1:" + std::to_string(port)};
  ServerProcess server(o);
  CHECK(process(port) == "503");
  CHECK(health(port, "envoy.service.ext_proc.v3.ExternalProcessor") == "SERVING");
  CHECK(health(port, "liveness") == "SERVING");
  CHECK(lookup(port) == kUnimplemented);
  CHECK(process(server.grpc_port()) == "grpc " + std::to_string(kUnimplemented));
  CHECK(lookup(server.grpc_port()) == kOk);
  CHECK(server.log().find("\"gateway_port\":" + std::to_string(port)) != std::string::npos);
  CHECK(server.stop() == 0);
}

TEST_CASE("--gateway=false: no picker anywhere") {
  ServerOptions o;
  o.extra_args = {"--gateway=false", "--gateway-listen", "127.0.0.1:1"};
  ServerProcess server(o);
  CHECK(process(server.grpc_port()) == "grpc " + std::to_string(kUnimplemented));
  CHECK(lookup(server.grpc_port()) == kOk);
  CHECK(server.stop() == 0);
}

TEST_CASE("--gateway-listen: an address that does not parse exits 2 with the flag's name") {
  ServerOptions o;
  o.extra_args = {"--gateway-listen", "nowhere"};
  CHECK_THROWS_WITH_AS(ServerProcess{o}, doctest::Contains("--gateway-listen"), std::runtime_error);
}

TEST_CASE("a tenant the engines do not report as is picked among the engines' endpoints") {
  ServerOptions o;
  o.extra_args = {"--threads", "2", "--gateway-body-mode", "buffered", "--gateway-default-tenant",
                  "engines"};
  ServerProcess server(o);
  const std::uint16_t port = server.grpc_port();
  CHECK(picked_for(port, "newcomer-0") == "503");  // nothing reported yet
  REQUIRE(report_stats(port, "engines", "10.0.0.9:8000") == kOk);
  // Another tenant's reporter is not the pool: it attracts nobody else's requests.
  REQUIRE(report_stats(port, "team-b", "10.0.0.66:8000") == kOk);
  // Tenants owned by either core, on fresh connections (either core's stream):
  // model "m" has no tokenizer here, so each is picked by load among the
  // endpoints the engines' tenant reports.
  for (int i = 0; i < 6; ++i)
    CHECK(picked_for(port, "newcomer-" + std::to_string(i)) == "10.0.0.9:8000");
  CHECK(picked_for(port, "team-b") == "10.0.0.66:8000");
  // A body that names no model: the engines' endpoints of every model.
  for (const char* tenant : {"newcomer-0", "newcomer-1", "team-b", "engines"})
    CHECK(picked_for(port, tenant, "not json") == "10.0.0.9:8000");
  CHECK(server.stop() == 0);
}
