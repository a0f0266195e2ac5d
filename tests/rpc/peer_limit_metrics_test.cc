// inferencecache_peer_limit_hits_total as the rpc layer registers it
// (rpc/peer_limit_metrics.hh): every h2::LimitHit kind, in enum order.
#include "rpc/peer_limit_metrics.hh"

#include <doctest/doctest.h>

#include <string>

#include "metrics/prometheus.hh"

TEST_CASE("peer limit hits: one counter per kind on the calling core, summed on render") {
  ic::metrics::Registry registry(2);
  ic::rpc::register_peer_limit_metrics(registry);
  registry.bind_current_thread(1);
  ic::rpc::count_peer_limit_hit(ic::h2::LimitHit::kFlood);
  ic::rpc::count_peer_limit_hit(ic::h2::LimitHit::kFlood);
  registry.bind_current_thread(0);
  ic::rpc::count_peer_limit_hit(ic::h2::LimitHit::kHeaderTimeout);
  ic::rpc::count_peer_limit_hit(ic::h2::LimitHit::kFlood);
  ic::metrics::Sample merged = registry.core(0).collect();
  merged.merge(registry.core(1).collect());
  const std::string rendered = ic::metrics::render_prometheus(merged, ic::metrics::ProcessFigures{},
                                                              registry.registrations());
  const std::string expected =
      "# TYPE inferencecache_http_requests_total counter\n"
      "inferencecache_http_requests_total 0\n"
      "# HELP inferencecache_peer_limit_hits_total Hostile-peer limits hit on gRPC connections "
      "by kind (docs/hostile-peers.md).\n"
      "# TYPE inferencecache_peer_limit_hits_total counter\n"
      "inferencecache_peer_limit_hits_total{kind=\"header_timeout\"} 1\n"
      "inferencecache_peer_limit_hits_total{kind=\"body_timeout\"} 0\n"
      "inferencecache_peer_limit_hits_total{kind=\"window_stall\"} 0\n"
      "inferencecache_peer_limit_hits_total{kind=\"half_closed\"} 0\n"
      "inferencecache_peer_limit_hits_total{kind=\"hpack_expansion\"} 0\n"
      "inferencecache_peer_limit_hits_total{kind=\"rejected_headers\"} 0\n"
      "inferencecache_peer_limit_hits_total{kind=\"flood\"} 3\n"
      "# HELP inferencecache_policy_reloads_total ";
  CHECK(rendered.find(expected) != std::string::npos);
}
