#pragma once
// The four index-backed InferenceCache methods (docs/contract.md "RPCs",
// docs/index.md, docs/lookup.md) over the sharded index
// (sharding/sharded_index.hh); service/inference_cache.cc registers them.
//   LookupRoute      unary; deadline = grpc-timeout, handed to the shard's
//                    pipeline (answers reason_code TIMEOUT) and guarded on the
//                    connection's core by a timer that answers TIMEOUT if the
//                    owner's answer is late; never a gRPC error once decoded;
//                    owner mailbox full → NO_HINT (fail open). prompt_text
//                    becomes token_ids on this core first (prompt_input.hh).
//   ReportCacheState client stream; every message is ingested as it arrives
//                    (inline or on the owner, FIFO per core pair); owner
//                    mailbox full → RESOURCE_EXHAUSTED. At half-close a
//                    barrier goes through each owner core used, and
//                    Ack{accepted:true} follows once all came back, i.e.
//                    after every ingest of the stream was applied. A reset
//                    stream keeps every message already fully received.
//   PublishEvent     unary; applied on the owner, then Ack{accepted:true};
//                    owner mailbox full → RESOURCE_EXHAUSTED.
//   GetCacheState    unary; the owner's (tenant, model) aggregate; owner
//                    mailbox full → RESOURCE_EXHAUSTED.
// Metrics (metrics::local() of the core doing the work): record_lookup per
// answer, add_ingest per update, add_event per event, add_cross_core_post per
// call.

#include "prompt_text/scheduler.hh"
#include "rpc/call.hh"
#include "service/prompt_input.hh"
#include "sharding/sharded_index.hh"

namespace ic::service::index_methods {

using sharding::ShardedIndex;  // the cross-core index (src/sharding/)

// Each returns the method's table entry; `index` (and `prompt` and
// `scheduler`, when not nullptr) outlive the sessions. `prompt` nullptr:
// prompt_text always fails open (service/prompt_input.hh). `scheduler`: this
// core's, shared with the other surfaces that tokenize
// (prompt_text/scheduler.hh); nullptr: prompt_text is tokenized in one go
// (tests and tools only: the server always gives one).
rpc::Method lookup_route(ShardedIndex& index, const PromptTextConfig* prompt,
                         prompt_text::Scheduler* scheduler);
rpc::Method report_cache_state(ShardedIndex& index);
rpc::Method publish_event(ShardedIndex& index);
rpc::Method get_cache_state(ShardedIndex& index);

}  // namespace ic::service::index_methods
