#include "service/prompt_lookup.hh"

#include <utility>

namespace ic::service {

PromptLookup::PromptLookup(index::Clock& clock, const PromptTextConfig& config,
                           const PromptPlan& plan, rpc::CallHandle call,
                           ::inferencecache::v1alpha1::LookupRouteRequest&& request,
                           const index::LookupContext& ctx, std::int64_t wall_us, Then then)
    : clock_(clock),
      call_(std::move(call)),
      request_(std::move(request)),
      ctx_(ctx),
      wall_us_(wall_us),
      then_(std::move(then)),
      tokenizing_(config, plan, request_.prompt_text()) {}

bool PromptLookup::run(std::int64_t slice_end_mono_us) {
  if (!call_.alive()) return true;  // the client left: nothing to answer
  if (!tokenizing_.run_slice(clock_, slice_end_mono_us)) return false;
  if (tokenizing_.ok()) {
    apply_prompt_tokens(tokenizing_.tokens(), request_);
    ctx_.token_ids_from_prompt = true;
  }
  LookupClock call_clock(clock_, wall_us_);
  ctx_.clock = &call_clock;
  then_(ctx_, call_clock, std::move(call_), std::move(request_));
  return true;
}

}  // namespace ic::service
