// Server killed and restarted mid-stream: the adapter reconnects, re-sends its whole state and the
// new server's index converges, with the counters showing it. Also the stats path (engine scrape →
// GetCacheState) and the adapter's /healthz and /readyz.
#include <doctest/doctest.h>
#include <httplib.h>
#include <signal.h>

#include <thread>

#include "e2e.hh"
#include "fixtures.hh"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "support/grpc_channel.hh"
#include "support/text.hh"

namespace ic::tools::kvevents::test {
namespace {

namespace v1 = inferencecache::v1alpha1;
constexpr auto kWait = std::chrono::seconds(60);

itest::ServerOptions on_port(std::uint16_t port) {
  itest::ServerOptions o;
  o.extra_args = server_flags();
  o.grpc_port = port;
  return o;
}

v1::GetCacheStateResponse cache_state(std::uint16_t port, const std::string& tenant_id) {
  auto stub = v1::InferenceCache::NewStub(itest::insecure_channel(port));
  v1::GetCacheStateRequest request;
  request.set_tenant_id(tenant_id);
  request.set_model_id("m");
  grpc::ClientContext context;
  context.set_deadline(itest::deadline_in(std::chrono::seconds(10)));
  v1::GetCacheStateResponse response;
  const auto status = stub->GetCacheState(&context, request, &response);
  REQUIRE(status.ok());
  return response;
}

}  // namespace

TEST_CASE("kill and restart the server mid-stream: reconnect, snapshot, the index converges") {
  const std::uint16_t port = itest::free_loopback_port();
  auto server = std::make_unique<itest::ServerProcess>(on_port(port));
  const std::string tenant_id = tenant(50);
  auto pub = make_publisher(true);
  AdapterProcess adapter(adapter_flags(*pub, port, tenant_id, true));
  REQUIRE(pub->wait_for_subscriber(kWait));
  const auto a = tokens(1, 2), b = tokens(2), c = tokens(3), d = tokens(4);
  pub->publish(batch({store({1, 2}, a), store({3}, b)}));
  const auto want_a = [](const Answer& x) { return summary(x) == "PREFIX_MATCH r:32"; };
  CHECK(summary(wait_lookup(port, by_tokens(tenant_id, a), want_a, kWait)) == "PREFIX_MATCH r:32");

  server->signal(SIGKILL);
  CHECK(server->wait_exit(std::chrono::seconds(20)) == 128 + SIGKILL);
  server.reset();
  CHECK(adapter.wait_metric("inferencecache_kvevents_send_errors_total", "", 1, kWait));
  CHECK(adapter.metric("inferencecache_kvevents_server_connected") == 0.0);
  CHECK(adapter.http_status("/readyz") == 503);
  CHECK(adapter.http_status("/healthz") == 200);
  // The server away is said in the log at once, then not again for every reconnect attempt.
  const std::string unreachable = "cannot reach the InferenceCache server; retrying with backoff";
  const auto count = [&adapter, &unreachable] {
    const std::string log = adapter.log();
    std::size_t n = 0;
    for (auto at = log.find(unreachable); at != std::string::npos;
         at = log.find(unreachable, at + 1)) {
      ++n;
    }
    return n;
  };
  for (const auto until = std::chrono::steady_clock::now() + kWait;
       count() == 0 && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(count() == 1);
  // The engine goes on while the server is away: C stored, B removed.
  pub->publish(batch({store({4}, c), removal({3})}));
  // Several reconnect attempts (100 ms, 200 ms, 400 ms, ... apart) go by unlogged.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  CHECK(count() == 1);
  server = std::make_unique<itest::ServerProcess>(on_port(port));
  CHECK(adapter.wait_metric("inferencecache_kvevents_reconnects_total", "", 2, kWait));
  CHECK(adapter.wait_metric("inferencecache_kvevents_snapshots_total", "", 2, kWait));
  // Live traffic after the reconnect lands too.
  pub->publish(batch({store({5}, d)}));
  const auto want = [](const std::string& s) {
    return [s](const Answer& x) { return summary(x) == s; };
  };
  CHECK(summary(wait_lookup(port, by_tokens(tenant_id, d), want("PREFIX_MATCH r:16"), kWait)) ==
        "PREFIX_MATCH r:16");
  CHECK(summary(lookup(port, by_tokens(tenant_id, a))) == "PREFIX_MATCH r:32");
  CHECK(summary(lookup(port, by_tokens(tenant_id, c))) == "PREFIX_MATCH r:16");
  CHECK(lookup(port, by_tokens(tenant_id, b)).reason != "PREFIX_MATCH");
  CHECK(cache_state(port, tenant_id).summary().total_prefixes() == 4);  // a (2 blocks), c, d
  CHECK(adapter.metric("inferencecache_kvevents_server_connected") == 1.0);
  CHECK(adapter.http_status("/readyz") == 200);
  CHECK(adapter.metric("inferencecache_kvevents_resyncs_total", "reason=\"publisher_restart\"") ==
        0.0);
}

TEST_CASE("stats: the engine's /metrics becomes the replica's stats on the server") {
  httplib::Server engine;
  std::string body = read_data("engine-metrics/vllm_metrics_cpu.txt");
  std::mutex body_mutex;
  engine.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    std::lock_guard lock(body_mutex);
    res.set_content(body, "text/plain; version=0.0.4");
  });
  const int engine_port = engine.bind_to_any_port("127.0.0.1");
  REQUIRE(engine_port > 0);
  std::thread engine_thread([&] { engine.listen_after_bind(); });
  {
    auto& server = shared_server();
    const std::string tenant_id = tenant(51);
    auto pub = make_publisher(false);
    auto flags = adapter_flags(*pub, server.grpc_port(), tenant_id, false);
    for (std::size_t i = 0; i + 1 < flags.size(); ++i) {
      if (flags[i] == "--engine-metrics-url") {
        flags[i + 1] = itest::numbered("http://127.0.0.1:", engine_port) + "/metrics";
      }
    }
    flags.insert(flags.end(),
                 {"--stats-interval", "200ms", "--engine-cache-size-bytes", "1000000"});
    AdapterProcess adapter(flags);
    // Stats alone do not make the tenant known; one block does.
    pub->publish(batch({store({1}, tokens(1))}));
    CHECK(adapter.wait_metric("inferencecache_kvevents_stats_sent_total", "", 1, kWait));
    {
      std::lock_guard lock(body_mutex);
      body = read_data("engine-metrics/vllm_metrics_cpu_tick2.txt");
    }
    // Wait for a scrape of tick2: hit_rate (95 − 25) / (200 − 100) = 0.7.
    v1::GetCacheStateResponse state;
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    do {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      state = cache_state(server.grpc_port(), tenant_id);
    } while ((state.replicas_size() == 0 || state.replicas(0).hit_rate() < 0.69f) &&
             std::chrono::steady_clock::now() < deadline);
    REQUIRE(state.replicas_size() == 1);
    const auto& r = state.replicas(0);
    CHECK(r.replica_id() == "r");
    CHECK(r.hit_rate() == doctest::Approx(0.7));
    CHECK(r.pressure() == doctest::Approx(8.0 / 256));
    CHECK(r.cache_memory_bytes() == 550000);
    CHECK(adapter.metric("inferencecache_kvevents_engine_scrape_errors_total") == 0.0);
  }
  engine.stop();
  engine_thread.join();
}

}  // namespace ic::tools::kvevents::test
