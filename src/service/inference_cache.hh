#pragma once
// The inferencecache.v1alpha1.InferenceCache methods (docs/contract.md "RPCs").
//
// Contract defaults (no index attached; service/index_methods.hh otherwise): LookupRoute →
// {reason_code NO_HINT}; ReportCacheState drains the stream and answers Ack{accepted:true} on
// half-close; PublishEvent → Ack{accepted:true}; GetCacheState → empty;
// RenderTemplate → {reason_code "OK"} (the server replaces it with
// templates/render_method.hh); LookupPDRoute → {reason_code
// "NO_HINT"} (service/pd_methods.hh with an index); StreamCacheEvents / StreamMetrics close at once
// with OK (service/event_fanout.hh and service/metric_stream.hh replace them when the server has an
// index and a metrics source). Every undecodable request is INVALID_ARGUMENT (src/rpc/typed.hh).

#include <string_view>

#include "rpc/call.hh"

namespace ic::sharding {
class ShardedIndex;
}  // namespace ic::sharding

namespace ic::prompt_text {
class Scheduler;
}  // namespace ic::prompt_text

namespace ic::service {

// Service name and the method path prefix.
inline constexpr std::string_view kInferenceCacheService = "inferencecache.v1alpha1.InferenceCache";

using sharding::ShardedIndex;  // the cross-core index (src/sharding/)
struct PromptTextConfig;

// Registers the eight methods in `methods`, once each: LookupRoute,
// ReportCacheState, PublishEvent and GetCacheState over `index`
// (service/index_methods.hh) or, with `index` nullptr, the contract defaults
// above. `index`, `prompt` and `scheduler` outlive the sessions; `prompt`
// nullptr: prompt_text always fails open; `scheduler`: this core's
// (prompt_text/scheduler.hh), nullptr: prompt_text tokenized in one go.
void add_inference_cache(rpc::MethodTable& methods, ShardedIndex* index = nullptr,
                         const PromptTextConfig* prompt = nullptr,
                         prompt_text::Scheduler* scheduler = nullptr);

}  // namespace ic::service
