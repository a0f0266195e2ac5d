// Many streams on one connection and many connections at once against the
// real inferencecache-server (docs/architecture.md rule 5: backpressure, never an
// unbounded queue; docs/contract.md: every well-formed LookupRoute is OK).
#include <doctest/doctest.h>

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

// OK, NO_HINT on the cold index, and the adapter echo proves the answer
// belongs to request `i` (no cross-stream mix-up).
void check_lookup(const H2Response& r, int i) {
  CAPTURE(i);
  REQUIRE(r.grpc_status() == kOk);
  auto resp = parse_single<pb::LookupRouteResponse>(r.body);
  CHECK(resp.reason_code() == "NO_HINT");
  CHECK(resp.replica_scores_size() == 0);
  CHECK(resp.adapter_id() == numbered("a", i));
}

std::string probe_updates(int n) {
  std::string body;
  for (int i = 0; i < n; ++i) {
    pb::CacheStateUpdate u;
    u.set_replica_id(numbered("replica-", i));
    u.set_model_id("llama-3-8b");
    u.set_tenant_id("inferencecache.io/probe");
    u.set_hash_scheme("vllm-sha256");
    body += frame_message(u);
  }
  return body;
}

}  // namespace

TEST_CASE("1,000 concurrent LookupRoute streams on one connection all complete OK") {
  ServerProcess server;
  H2Client c(server.grpc_port());
  std::vector<int32_t> ids;
  for (int i = 0; i < 1000; ++i)
    ids.push_back(c.start(kLookupRoutePath, BodyPlan{frame_message(ic::test::numbered_lookup(i))}));
  REQUIRE(c.wait_all(60s));
  MESSAGE("server SETTINGS_MAX_CONCURRENT_STREAMS = " << c.remote_max_concurrent_streams());
  for (int i = 0; i < 1000; ++i) check_lookup(c.response(ids[i]), i);
  CHECK_FALSE(c.eof());
  CHECK(server.stop() == 0);
}

TEST_CASE("1,000 client streams held open on one connection, then half-closed, are all acked") {
  ServerProcess server;
  H2Client c(server.grpc_port());
  // Streams over the server's concurrency limit queue in the client (their
  // HEADERS wait), so hold open only as many as the server admits; the rest
  // start as earlier ones finish.
  std::vector<int32_t> ids;
  for (int i = 0; i < 1000; ++i)
    ids.push_back(c.start(kReportCacheStatePath, BodyPlan{probe_updates(3), 0, false}));
  c.flush();
  c.run_until([] { return false; }, 200ms);
  for (int32_t id : ids) c.send(id, probe_updates(2), true);
  REQUIRE(c.wait_all(60s));
  for (int32_t id : ids) {
    CAPTURE(id);
    const H2Response& r = c.response(id);
    REQUIRE(r.grpc_status() == kOk);
    CHECK(parse_single<pb::Ack>(r.body).accepted());
  }
  CHECK(server.stop() == 0);
}

TEST_CASE("200 concurrent connections each get their answer") {
  ServerProcess server;
  constexpr int kConnections = 200;
  std::vector<std::unique_ptr<H2Client>> clients;
  std::vector<int32_t> ids;
  // All connections open at once; every request is written before any answer is read.
  for (int i = 0; i < kConnections; ++i) {
    clients.push_back(std::make_unique<H2Client>(server.grpc_port()));
    ids.push_back(clients.back()->start(kLookupRoutePath,
                                        BodyPlan{frame_message(ic::test::numbered_lookup(i))}));
  }
  for (auto& c : clients) c->flush();
  for (int i = 0; i < kConnections; ++i) check_lookup(clients[i]->wait(ids[i], 20s), i);
  // A second round on the same connections (they stayed open).
  for (int i = 0; i < kConnections; ++i)
    ids[i] =
        clients[i]->start(kLookupRoutePath, BodyPlan{frame_message(ic::test::numbered_lookup(i))});
  for (auto& c : clients) c->flush();
  for (int i = 0; i < kConnections; ++i) {
    check_lookup(clients[i]->wait(ids[i], 20s), i);
    CHECK_FALSE(clients[i]->eof());
  }
  clients.clear();
  CHECK(health_serving(server.grpc_port(), 5s));
  CHECK(server.stop() == 0);
}
