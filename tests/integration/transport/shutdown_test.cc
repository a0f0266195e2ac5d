// Graceful shutdown (docs/contract.md "Shutdown on SIGTERM/SIGINT: stop
// accepting, GOAWAY, finish in-flight calls (bounded grace period), exit 0";
// docs/architecture.md rule 10). Calls are made in flight deterministically: their
// request bodies stay open across the signal and complete after it.
#include <doctest/doctest.h>

#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "support/builders.hh"
#include "support/grpc_frame.hh"
#include "support/h2_client.hh"
#include "support/server_process.hh"
#include "support/text.hh"

namespace pb = inferencecache::v1alpha1;
using namespace ic::itest;
using namespace std::chrono_literals;

namespace {

struct InFlight {
  std::unique_ptr<H2Client> client;
  std::vector<int32_t> unary;   // LookupRoute with the message's last bytes held back
  std::vector<int32_t> stream;  // ReportCacheState with one message sent, not half-closed
};

void run_shutdown(int sig) {
  ServerProcess server;
  constexpr int kConnections = 5;
  constexpr int kPerKind = 20;
  std::vector<InFlight> conns(kConnections);
  for (int c = 0; c < kConnections; ++c) {
    conns[c].client = std::make_unique<H2Client>(server.grpc_port());
    for (int i = 0; i < kPerKind; ++i) {
      std::string msg = frame_message(ic::test::numbered_lookup(i));
      conns[c].unary.push_back(conns[c].client->start(
          kLookupRoutePath, BodyPlan{msg.substr(0, msg.size() - 4), 0, false}));
      conns[c].stream.push_back(conns[c].client->start(
          kReportCacheStatePath, BodyPlan{frame_message(ic::test::probe_update()), 0, false}));
    }
  }
  // A barrier per connection: a complete call started after the held-open
  // ones. The server reads a connection's frames in order, so once that
  // call's answer is back it has opened every earlier stream, and the GOAWAY
  // below covers them all (a fixed wait lost the race on a loaded machine).
  for (auto& f : conns) {
    const int32_t barrier =
        f.client->start(kLookupRoutePath, BodyPlan{frame_message(ic::test::numbered_lookup(0))});
    REQUIRE(f.client->wait(barrier, 10s).grpc_status() == kOk);
  }

  server.signal(sig);
  // Every connection hears GOAWAY; the in-flight calls are still open.
  for (auto& f : conns) {
    CHECK(f.client->run_until([&] { return f.client->goaway_received(); }, 5s));
    CHECK(f.client->open_streams() == 2 * kPerKind);
  }
  CHECK(server.running());
  // Stop accepting: the listener is closed, so a new connection is refused.
  CHECK_THROWS(H2Client(server.grpc_port()));

  // Now the calls complete, after the signal.
  for (auto& f : conns) {
    for (int i = 0; i < kPerKind; ++i) {
      std::string msg = frame_message(ic::test::numbered_lookup(i));
      f.client->send(f.unary[i], msg.substr(msg.size() - 4), true);
      f.client->send(f.stream[i], frame_message(ic::test::probe_update()), true);
    }
  }
  for (auto& f : conns) {
    REQUIRE(f.client->wait_all(10s));
    for (int i = 0; i < kPerKind; ++i) {
      CAPTURE(i);
      const H2Response& u = f.client->response(f.unary[i]);
      REQUIRE(u.grpc_status() == kOk);
      auto resp = parse_single<pb::LookupRouteResponse>(u.body);
      CHECK(resp.reason_code() == "NO_HINT");
      CHECK(resp.adapter_id() == numbered("a", i));
      const H2Response& s = f.client->response(f.stream[i]);
      REQUIRE(s.grpc_status() == kOk);
      CHECK(parse_single<pb::Ack>(s.body).accepted());
    }
  }
  // With nothing left in flight the server closes the connections and exits 0.
  for (auto& f : conns) CHECK(f.client->run_until([&] { return f.client->eof(); }, 10s));
  CHECK(server.wait_exit(15s) == 0);
}

}  // namespace

TEST_CASE("SIGTERM: GOAWAY, in-flight calls complete OK, then exit 0") { run_shutdown(SIGTERM); }

TEST_CASE("SIGINT behaves like SIGTERM") { run_shutdown(SIGINT); }

TEST_CASE("SIGTERM with a call that never completes: exit 0 after the grace period") {
  ServerOptions options;
  options.extra_args = {"--shutdown-grace", "1s"};
  ServerProcess server(options);
  H2Client c(server.grpc_port());
  int32_t id =
      c.start(kReportCacheStatePath, BodyPlan{frame_message(ic::test::probe_update()), 0, false});
  c.flush();
  c.run_until([] { return false; }, 50ms);
  server.signal(SIGTERM);
  // The stream is ended by the server (error status or reset) or the connection closes.
  CHECK(c.run_until([&] { return c.response(id).done(); }, 10s));
  CHECK(server.wait_exit(10s) == 0);
}
