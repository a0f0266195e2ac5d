// Where the real server serves the endpoint picker (docs/gateway.md "Flags"):
// on the gRPC port by default; with --gateway-listen on a listener of its own
// that serves ext_proc, health and reflection only (InferenceCache stays on
// the gRPC port); with --gateway off nowhere.

#include <doctest/doctest.h>

#include <string>
#include <thread>

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

// One ext_proc stream on `port`: the headers of a body-less request of no
// tenant (picked on its headers), half-closed. The endpoints it is picked to
// (the x-gateway-destination-endpoint header), "503" when the picker
// answered it so (no endpoint known), else "grpc <status>".
std::string picked(std::uint16_t port) {
  H2Client client(port);
  xp::ProcessingRequest r;
  auto* h = r.mutable_request_headers();
  auto* path = h->mutable_headers()->add_headers();
  path->set_key(":path");
  path->set_raw_value("/v1/models");
  h->set_end_of_stream(true);
  const H2Response& answer = client.wait(client.start(kProcess, BodyPlan{frame_message(r)}));
  if (answer.grpc_status() != kOk)
    return "grpc " + std::to_string(answer.grpc_status().value_or(-1));
  const auto out = parse_single<xp::ProcessingResponse>(answer.body);
  if (out.has_immediate_response())
    return std::to_string(static_cast<int>(out.immediate_response().status().code()));
  for (const auto& m : out.request_headers().response().header_mutation().set_headers()) {
    if (m.header().key() == "x-gateway-destination-endpoint") return m.header().raw_value();
  }
  return "no endpoint header";
}

// `replica` reports stats for (tenant, model "m") over ReportCacheState.
int report_stats(std::uint16_t port, const std::string& tenant, const std::string& replica) {
  H2Client client(port);
  inferencecache::v1alpha1::CacheStateUpdate u;
  u.set_tenant_id(tenant);
  u.set_model_id("m");
  u.set_replica_id(replica);
  u.mutable_stats()->set_pressure(0.2f);
  return client
      .wait(client.start("/inferencecache.v1alpha1.InferenceCache/ReportCacheState",
                         BodyPlan{frame_message(u)}))
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
  CHECK(picked(server.grpc_port()) == "503");
  CHECK(lookup(server.grpc_port()) == kOk);
  CHECK(server.stop() == 0);
}

TEST_CASE("a tenant with no reports is picked among every tenant's endpoints, on any core") {
  // A fresh two-core server: the picking core has sent no request anywhere
  // and the default tenant has no reports; another tenant's do name an
  // endpoint. Before the server-wide endpoint copy this was a 503.
  ServerOptions o;
  o.extra_args = {"--threads", "2"};
  ServerProcess server(o);
  CHECK(picked(server.grpc_port()) == "503");
  CHECK(report_stats(server.grpc_port(), "reporter", "10.0.0.9:8000") == kOk);
  CHECK(report_stats(server.grpc_port(), "reporter", "not-an-endpoint") == kOk);
  // The copy of the first pick is at most a second old.
  std::this_thread::sleep_for(1100ms);
  for (int connection = 0; connection < 4; ++connection)
    CHECK(picked(server.grpc_port()) == "10.0.0.9:8000");
  CHECK(server.stop() == 0);
}

TEST_CASE("--gateway-listen: the picker on its own listener, InferenceCache on the gRPC port") {
  const std::uint16_t port = free_loopback_port();
  ServerOptions o;
  o.extra_args = {"--gateway-listen", "127.0.0.1:" + std::to_string(port)};
  ServerProcess server(o);
  CHECK(picked(port) == "503");
  CHECK(health(port, "envoy.service.ext_proc.v3.ExternalProcessor") == "SERVING");
  CHECK(health(port, "liveness") == "SERVING");
  CHECK(lookup(port) == kUnimplemented);
  CHECK(picked(server.grpc_port()) == "grpc " + std::to_string(kUnimplemented));
  CHECK(lookup(server.grpc_port()) == kOk);
  CHECK(server.log().find("\"gateway_port\":" + std::to_string(port)) != std::string::npos);
  CHECK(server.stop() == 0);
}

TEST_CASE("--gateway=false: no picker anywhere") {
  ServerOptions o;
  o.extra_args = {"--gateway=false", "--gateway-listen", "127.0.0.1:1"};
  ServerProcess server(o);
  CHECK(picked(server.grpc_port()) == "grpc " + std::to_string(kUnimplemented));
  CHECK(lookup(server.grpc_port()) == kOk);
  CHECK(server.stop() == 0);
}

TEST_CASE("--gateway-listen: an address that does not parse exits 2 with the flag's name") {
  ServerOptions o;
  o.extra_args = {"--gateway-listen", "nowhere"};
  CHECK_THROWS_WITH_AS(ServerProcess{o}, doctest::Contains("--gateway-listen"), std::runtime_error);
}
