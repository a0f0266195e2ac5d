#pragma once
// inferencecache_peer_limit_hits_total{kind} (docs/hostile-peers.md): the
// hostile-peer limits a gRPC connection's peer hit, counted per core. The rpc
// layer owns the family (its labels are h2::LimitHit's) and registers it with
// the metrics Registry (metrics/group.hh).

#include "h2/limits.hh"
#include "metrics/registry.hh"

namespace ic::rpc {

// Registers the family with `registry`; once, before the runtime starts.
void register_peer_limit_metrics(metrics::Registry& registry);

// Counts one `hit` on the calling core (metrics::local()); nothing before
// register_peer_limit_metrics ran.
void count_peer_limit_hit(h2::LimitHit hit);

}  // namespace ic::rpc
