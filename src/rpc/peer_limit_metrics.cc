#include "rpc/peer_limit_metrics.hh"

#include <vector>

namespace ic::rpc {

namespace {
// Written once before the reactors start (their threads' start orders it
// before every read); default: unregistered, counts nothing.
metrics::CounterFamilyId g_peer_limit_hits;
}  // namespace

void register_peer_limit_metrics(metrics::Registry& registry) {
  std::vector<std::string_view> kinds;
  for (std::size_t k = 0; k < h2::kLimitHitCount; ++k) {
    kinds.push_back(h2::to_label(static_cast<h2::LimitHit>(k)));
  }
  g_peer_limit_hits = registry.add_counter_family(metrics::CounterFamily{
      .name = "peer_limit_hits_total",
      .help = "Hostile-peer limits hit on gRPC connections by kind (docs/hostile-peers.md).",
      .label = "kind",
      .values = std::move(kinds),
  });
}

void count_peer_limit_hit(h2::LimitHit hit) {
  metrics::local().add(g_peer_limit_hits, static_cast<std::size_t>(hit));
}

}  // namespace ic::rpc
