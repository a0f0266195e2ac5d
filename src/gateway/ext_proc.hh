#pragma once
// envoy.service.ext_proc.v3.ExternalProcessor/Process: the Gateway API
// Inference Extension's endpoint picker (docs/gateway.md; the Endpoint
// Picker Protocol, gateway-api-inference-extension
// docs/proposals/004-endpoint-picker-protocol v1.0.0; Envoy's
// external_processor.proto). One bidirectional stream per HTTP request:
//
//   request_headers  the :path, the tenant header, the subset hint
//                    (metadata_context envoy.lb.subset_hint); end_of_stream
//                    → a pick by load, answered on the headers.
//   request_body     held (up to max_body_bytes) until end_of_stream, then
//                    parsed (gateway/openai_body.hh), tokenized as a job of
//                    the core's scheduler, one slice per reactor turn
//                    (gateway/prompt_tokens.hh PromptTokensJob,
//                    prompt_text/scheduler.hh; scheduler full → by load,
//                    busy; the tokenizing deadline → by load, timeout) and
//                    picked (gateway/picker.hh). Messages arriving meanwhile
//                    wait, so a stream has one job at a time: up to
//                    max_body_bytes of them (and the core's budget); past
//                    that the stream stops waiting and picks by load from
//                    this core's knowledge (busy), then goes on in order.
//                    Full-duplex: the headers answer waits for the pick, then
//                    the held body goes back as streamed_response chunks;
//                    buffered: the pick rides on the body answer; streamed:
//                    every chunk is answered CONTINUE, the last one with the pick.
//   the pick         header x-gateway-destination-endpoint and dynamic
//                    metadata envoy.lb/x-gateway-destination-endpoint, both
//                    "ip:port,ip:port,..." best first, clear_route_cache; no
//                    eligible endpoint → ImmediateResponse 503; over the
//                    shedding bound → ImmediateResponse 429.
//   response_*       answered CONTINUE (full-duplex body chunks passed back);
//                    metadata envoy.lb/x-gateway-destination-endpoint-served
//                    names the endpoint that served; the first response
//                    message's arrival is its time to first byte, the
//                    response's end ends the request (gateway/endpoints.hh);
//                    all three reach the work-aware ranking's booking
//                    (gateway/picker.hh feedback()). A half-close ends the
//                    stream once a pick on its way is answered.
//
// A client's mistake never errors the stream: a body that gives no token ids
// is picked by load and counted by reason. A message that does not decode
// ends the stream INVALID_ARGUMENT (the gateway's own fault).

#include "gateway/config.hh"
#include "prompt_text/scheduler.hh"
#include "rpc/call.hh"
#include "sharding/sharded_index.hh"

namespace ic::gateway {

// The method's table entry; `config`, `index` and `scheduler` (this core's,
// shared with the other surfaces that tokenize) outlive the sessions.
// `scheduler` nullptr: bodies are tokenized in one go (tests, tools).
rpc::Method ext_proc_method(const GatewayConfig& config, sharding::ShardedIndex& index,
                            prompt_text::Scheduler* scheduler = nullptr);

// Registers /envoy.service.ext_proc.v3.ExternalProcessor/Process in `methods`.
void add_ext_proc(rpc::MethodTable& methods, const GatewayConfig& config,
                  sharding::ShardedIndex& index, prompt_text::Scheduler* scheduler = nullptr);

}  // namespace ic::gateway
