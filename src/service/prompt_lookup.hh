#pragma once
// A lookup waiting for its prompt_text to be tokenized (docs/prompt-text.md),
// one slice per reactor turn (prompt_text/scheduler.hh), then handed on
// with token_ids set (or as it was: the lookup then fails open). The one job
// of LookupRoute (index_methods.cc) and LookupPDRoute (pd_methods.cc, whose
// LookupRoute inputs wait in a LookupRouteRequest), so both tokenize alike.

#include <cstdint>
#include <functional>

#include "index/clock.hh"
#include "index/shard.hh"
#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "prompt_text/scheduler.hh"
#include "rpc/call.hh"
#include "service/lookup_clock.hh"
#include "service/prompt_input.hh"

namespace ic::service {

class PromptLookup final : public prompt_text::Scheduler::Job {
 public:
  // Routes the call once the prompt is resolved; `ctx.clock` is `call_clock`
  // (on the caller's stack for the call only).
  using Then =
      std::function<void(index::LookupContext& ctx, LookupClock& call_clock, rpc::CallHandle call,
                         ::inferencecache::v1alpha1::LookupRouteRequest&& request)>;

  // `clock` (the index's) and `config` outlive the job; `wall_us` is the
  // call's wall time (LookupClock; < 0: read from `clock`).
  PromptLookup(index::Clock& clock, const PromptTextConfig& config, const PromptPlan& plan,
               rpc::CallHandle call, ::inferencecache::v1alpha1::LookupRouteRequest&& request,
               const index::LookupContext& ctx, std::int64_t wall_us, Then then);

  // One slice; true once the call was handed on (or its client left).
  bool run(std::int64_t slice_end_mono_us) override;

 private:
  index::Clock& clock_;
  rpc::CallHandle call_;
  ::inferencecache::v1alpha1::LookupRouteRequest request_;  // before tokenizing_: it views
                                                            // the prompt_text
  index::LookupContext ctx_;
  std::int64_t wall_us_;
  Then then_;
  PromptTokenizing tokenizing_;
};

}  // namespace ic::service
