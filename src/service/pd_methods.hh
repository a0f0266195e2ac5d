#pragma once
// LookupPDRoute (docs/pd-routing.md) over the sharded index: unary; the
// request runs on its tenant's owner core (Shard::lookup_pd, where the
// tenant's bookings live) and the answer comes back here. An empty
// pd_topology_ref answers the contract default NO_HINT on this core.
// grpc-timeout is handed to the shard (reason TIMEOUT) and, as LookupRoute's
// (index_methods.hh), guarded on this core by a timer that answers TIMEOUT if
// the owner's answer is late: never DEADLINE_EXCEEDED once the request is
// complete. Owner mailbox full → NO_HINT (fail open). prompt_text becomes
// token_ids on this core first, exactly as LookupRoute's (prompt_input.hh,
// the PromptLookup job on this core's tokenizing scheduler, the one
// LookupRoute, the endpoint picker and RenderTemplate share, prompt_lookup.hh).
// Metrics: every answer in inferencecache_lookup_pd_route_* on the core that
// answers it (sharding/pd_metrics.hh), add_cross_core_post per call.

#include "prompt_text/scheduler.hh"
#include "rpc/call.hh"
#include "service/prompt_input.hh"
#include "sharding/sharded_index.hh"

namespace ic::service::pd_methods {

using sharding::ShardedIndex;  // the cross-core index (src/sharding/)

// The method's table entry; `index` (and `prompt` and `scheduler`, when not
// nullptr: this core's) outlive the sessions. `prompt` nullptr: prompt_text
// always fails open (NO_HINT); `scheduler` nullptr: tokenized in one go.
rpc::Method lookup_pd_route(ShardedIndex& index, const PromptTextConfig* prompt,
                            prompt_text::Scheduler* scheduler);

}  // namespace ic::service::pd_methods
