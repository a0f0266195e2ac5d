// --max-connection-age and --max-connection-age-grace (docs/admin.md "Flags"): a gRPC
// connection past its age gets GOAWAY (NO_ERROR, the last stream it processed); its in-flight
// calls finish within the grace, then it closes; a new connection is served. Calls are held in
// flight deterministically, as in shutdown_test: their request bodies stay open across the
// GOAWAY and complete after it. The ages are 3 s (jittered to ≥ 2.7 s) so that the calls a
// case makes before the GOAWAY are served first even on a loaded machine under ASan. An age
// is not a shutdown: health watchers hear nothing and long-lived streams run until the grace.
#include <doctest/doctest.h>

#include <grpcpp/grpcpp.h>

#include <string>
#include <thread>
#include <vector>

#include "../admin/http_client.hh"
#include "grpc/health/v1/health.pb.h"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "support/builders.hh"
#include "support/grpc_channel.hh"
#include "support/grpc_frame.hh"
#include "support/h2_client.hh"
#include "support/server_process.hh"

namespace pb = inferencecache::v1alpha1;
using namespace ic::itest;
using namespace std::chrono_literals;

namespace {

ServerOptions aged(const char* age, const char* grace) {
  ServerOptions options;
  options.extra_args = {"--max-connection-age", age, "--max-connection-age-grace", grace};
  return options;
}

// The grpc.health.v1 statuses in a Health/Watch response body so far.
std::vector<int> health_statuses(const H2Response& r) {
  std::vector<int> out;
  for (const std::string& m : unframe(r.body)) {
    grpc::health::v1::HealthCheckResponse response;
    if (!response.ParseFromString(m)) return {-1};
    out.push_back(response.status());
  }
  return out;
}

// One complete LookupRoute on `c`: its grpc-status.
std::optional<int> lookup(H2Client& c) {
  const int32_t id =
      c.start(kLookupRoutePath, BodyPlan{frame_message(ic::test::numbered_lookup(0))});
  return c.wait(id, 10s).grpc_status();
}

// inferencecache_connections_accepted_total{listener="grpc"} on /metrics; -1 when absent.
int grpc_connections_accepted(ServerProcess& server) {
  const std::string metrics = http_request(server.http_port(), "GET", "/metrics").body;
  const std::string series = "\ninferencecache_connections_accepted_total{listener=\"grpc\"} ";
  const std::size_t at = metrics.find(series);
  return at == std::string::npos ? -1 : std::stoi(metrics.substr(at + series.size()));
}

}  // namespace

TEST_CASE(
    "past --max-connection-age: GOAWAY, in-flight calls complete OK, a new connection serves") {
  ServerProcess server(aged("3s", "30s"));
  H2Client c(server.grpc_port());
  std::string msg = frame_message(ic::test::numbered_lookup(1));
  const int32_t unary =
      c.start(kLookupRoutePath, BodyPlan{msg.substr(0, msg.size() - 4), 0, false});
  const int32_t stream =
      c.start(kReportCacheStatePath, BodyPlan{frame_message(ic::test::probe_update()), 0, false});
  // A complete call after the held ones: once answered, the server processed all three.
  const int32_t barrier =
      c.start(kLookupRoutePath, BodyPlan{frame_message(ic::test::numbered_lookup(0))});
  REQUIRE(c.wait(barrier, 10s).grpc_status() == kOk);

  REQUIRE(c.run_until([&] { return c.goaway_received(); }, 20s));
  CHECK(c.goaway_last_stream_id() == barrier);
  CHECK(c.goaway_error() == 0);  // NO_ERROR: an age, not a limit the peer hit
  CHECK(c.open_streams() == 2);
  CHECK_FALSE(c.eof());

  // The calls in flight at the GOAWAY finish normally within the grace.
  c.send(unary, msg.substr(msg.size() - 4), true);
  c.send(stream, frame_message(ic::test::probe_update()), true);
  REQUIRE(c.wait_all(10s));
  REQUIRE(c.response(unary).grpc_status() == kOk);
  CHECK(parse_single<pb::LookupRouteResponse>(c.response(unary).body).adapter_id() == "a1");
  REQUIRE(c.response(stream).grpc_status() == kOk);
  CHECK(parse_single<pb::Ack>(c.response(stream).body).accepted());
  // Nothing left in flight: the server closes the connection.
  CHECK(c.run_until([&] { return c.eof(); }, 10s));

  // The client's next connection is served (and gets its own age).
  H2Client next(server.grpc_port());
  CHECK(lookup(next) == kOk);
  CHECK_FALSE(next.goaway_received());
  CHECK(server.stop() == 0);
}

TEST_CASE("a call still in flight when --max-connection-age-grace ends: the connection closes") {
  ServerProcess server(aged("3s", "1s"));
  H2Client c(server.grpc_port());
  std::string msg = frame_message(ic::test::numbered_lookup(1));
  const int32_t held = c.start(kLookupRoutePath, BodyPlan{msg.substr(0, msg.size() - 4), 0, false});
  REQUIRE(lookup(c) == kOk);
  REQUIRE(c.run_until([&] { return c.goaway_received(); }, 20s));
  CHECK(c.run_until([&] { return c.eof(); }, 20s));
  CHECK(c.response(held).grpc_status() != kOk);
  CHECK(server.stop() == 0);
}

TEST_CASE(
    "a grpc++ channel past the age reconnects on its own: the next call works on a new "
    "connection") {
  ServerProcess server(aged("3s", "10s"));
  const auto channel = insecure_channel(server.grpc_port());
  const auto stub = pb::InferenceCache::NewStub(channel);
  const auto call = [&stub] {
    grpc::ClientContext context;
    context.set_deadline(deadline_in(10s));
    pb::LookupRouteResponse response;
    return stub->LookupRoute(&context, ic::test::numbered_lookup(0), &response).ok();
  };
  REQUIRE(call());
  REQUIRE(channel->GetState(false) == GRPC_CHANNEL_READY);
  const int accepted = grpc_connections_accepted(server);
  // The GOAWAY moves the channel off READY; nothing is asked of the application.
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (channel->GetState(false) == GRPC_CHANNEL_READY &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(20ms);
  }
  CHECK(channel->GetState(false) != GRPC_CHANNEL_READY);
  CHECK(call());
  // One more gRPC connection than before the age: the channel's second.
  CHECK(grpc_connections_accepted(server) == accepted + 1);
  CHECK(server.stop() == 0);
}

TEST_CASE(
    "past the age the server stays healthy: a Health/Watch hears no NOT_SERVING, a "
    "StreamMetrics stream runs on until the grace ends, then both are cut") {
  ServerOptions options = aged("3s", "3s");
  options.extra_args.insert(options.extra_args.end(), {"--metrics-stream-interval", "200ms"});
  ServerProcess server(options);
  H2Client c(server.grpc_port());
  const int32_t watch = c.start("/grpc.health.v1.Health/Watch",
                                BodyPlan{frame_message(grpc::health::v1::HealthCheckRequest())});
  const int32_t metrics =
      c.start(method_path("StreamMetrics"), BodyPlan{frame_message(pb::StreamMetricsRequest())});
  REQUIRE(c.run_until([&] { return !c.response(metrics).body.empty(); }, 10s));
  REQUIRE(c.run_until([&] { return c.goaway_received(); }, 20s));
  CHECK(c.goaway_error() == 0);
  CHECK(c.goaway_last_stream_id() == metrics);
  const std::size_t metrics_at_goaway = c.response(metrics).body.size();

  // The grace: both streams stay open and the metric samples keep coming.
  REQUIRE(c.run_until([&] { return c.eof(); }, 20s));
  CHECK(health_statuses(c.response(watch)) ==
        std::vector<int>{grpc::health::v1::HealthCheckResponse::SERVING});
  CHECK(c.response(metrics).body.size() > metrics_at_goaway);
  // Cut at the grace, not ended by the server: no trailers, no grpc-status.
  CHECK_FALSE(c.response(watch).grpc_status().has_value());
  CHECK_FALSE(c.response(metrics).grpc_status().has_value());

  // The clients reconnect: the server is still SERVING.
  H2Client next(server.grpc_port());
  const int32_t again = next.start("/grpc.health.v1.Health/Watch",
                                   BodyPlan{frame_message(grpc::health::v1::HealthCheckRequest())});
  REQUIRE(next.run_until([&] { return !next.response(again).body.empty(); }, 10s));
  CHECK(health_statuses(next.response(again)) ==
        std::vector<int>{grpc::health::v1::HealthCheckResponse::SERVING});
  CHECK(server.stop() == 0);
}

TEST_CASE("without --max-connection-age a connection gets no GOAWAY") {
  ServerProcess server;
  H2Client c(server.grpc_port());
  REQUIRE(lookup(c) == kOk);
  CHECK_FALSE(c.run_until([&] { return c.goaway_received(); }, 2s));
  CHECK(lookup(c) == kOk);
  CHECK(server.stop() == 0);
}
