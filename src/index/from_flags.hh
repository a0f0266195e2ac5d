#pragma once
// The index's server-level knobs (IndexConfig) as inferencecache-server builds them from its
// flags (config/flags.hh ServerConfig): the one mapping, shared by the server's composition root
// (server/app.cc: every core's Shard and the spread placement's copies) and the replay's
// in-process index (tools/replay/in_process_index_client.hh), so both rank with the same knobs.
// The fields ServerConfig does not set keep IndexConfig's defaults (index/shard.hh).

#include "config/flags.hh"
#include "index/shard.hh"

namespace ic::index {

// --index-ttl, --index-max-entries, --engine-block-size, --ranking, the work-aware knobs
// (--prefill-rate, --uncached-weight) and the load-aware ones (--load-cost-tokens, ...).
IndexConfig index_config(const config::ServerConfig& config);

}  // namespace ic::index
