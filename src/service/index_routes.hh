#pragma once
// The index-backed InferenceCache methods (docs/contract.md "RPCs",
// docs/index.md, docs/lookup.md), routed by IndexRouter:
//   LookupRoute      unary; deadline = grpc-timeout, handed to the shard's
//                    pipeline (answers reason_code TIMEOUT) and guarded on the
//                    connection's core by a timer that answers TIMEOUT if the
//                    owner's answer is late; never a gRPC error once decoded;
//                    owner mailbox full → NO_HINT (fail open). prompt_text
//                    becomes token_ids on this core first (prompt_input.hh).
//   ReportCacheState client stream; every message is ingested as it arrives
//                    (inline or posted to the owner, FIFO per core pair); at
//                    half-close a barrier goes through each owner core used,
//                    and Ack{accepted:true} follows once all came back, i.e.
//                    after every ingest of the stream was applied. A reset
//                    stream keeps every message already fully received.
//   PublishEvent     unary; applied on the owner, then Ack{accepted:true}.
//   GetCacheState    unary; the owner's (tenant, model) aggregate.
// Metrics (metrics::local() of the core doing the work): record_lookup per
// answer, add_ingest per update, add_event per event, add_cross_core_post per
// hop.

#include "grpc/call.hh"
#include "service/index_router.hh"
#include "service/prompt_input.hh"

namespace ic::service {

// Registers (replacing any earlier registration) the four index-backed
// methods in `methods`. `router` and `prompt` outlive the sessions;
// `prompt` nullptr: prompt_text always fails open (service/prompt_input.hh).
void add_index_routes(grpc::MethodTable& methods, IndexRouter& router,
                      const PromptTextConfig* prompt = nullptr);

}  // namespace ic::service
