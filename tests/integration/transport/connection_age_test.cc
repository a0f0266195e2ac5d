// --max-connection-age and --max-connection-age-grace (docs/admin.md "Flags"): a gRPC
// connection past its age gets GOAWAY (NO_ERROR, the last stream it processed); its in-flight
// calls finish within the grace, then it closes; a new connection is served. Calls are held in
// flight deterministically, as in shutdown_test: their request bodies stay open across the
// GOAWAY and complete after it.
#include <doctest/doctest.h>

#include <grpcpp/grpcpp.h>

#include <string>
#include <thread>

#include "../admin/http_client.hh"
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
  ServerProcess server(aged("1s", "30s"));
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
  ServerProcess server(aged("1s", "1s"));
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
  ServerProcess server(aged("1s", "10s"));
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

TEST_CASE("without --max-connection-age a connection gets no GOAWAY") {
  ServerProcess server;
  H2Client c(server.grpc_port());
  REQUIRE(lookup(c) == kOk);
  CHECK_FALSE(c.run_until([&] { return c.goaway_received(); }, 2s));
  CHECK(lookup(c) == kOk);
  CHECK(server.stop() == 0);
}
