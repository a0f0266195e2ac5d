#include "service/prompt_input.hh"

#include <algorithm>
#include <vector>

#include "metrics/registry.hh"
#include "prompt_text/encoder.hh"

namespace ic::service {
namespace {

using metrics::PromptTextFailure;

// Whether step 5 would resolve this request's prompt_text (docs/lookup.md).
bool prompt_text_applies(const config::CachePolicy& policy,
                         const ::inferencecache::v1alpha1::LookupRouteRequest& r) {
  if (r.prompt_text().empty() || r.token_ids_size() > 0 || !r.prefix_hash().empty()) return false;
  if (r.tenant_id() == config::kReservedTenant) return false;
  const bool arrays = r.block_hashes_size() > 0 || r.block_token_counts_size() > 0;
  if (arrays && policy.enable_chain_matching) return false;  // a chain (or malformed arrays) wins
  const bool wire_chain =
      r.block_hashes_size() > 0 && r.block_hashes_size() == r.block_token_counts_size();
  return !(policy.require_chain && !wire_chain);  // else POLICY_REQUIRES_CHAIN comes first
}

bool fail(PromptTextFailure reason) {
  metrics::local().add_prompt_text_failure(reason);
  return false;
}

}  // namespace

bool resolve_prompt_text(const PromptTextConfig& config, const config::CachePolicy& policy,
                         index::Clock& clock, const index::LookupContext& ctx,
                         ::inferencecache::v1alpha1::LookupRouteRequest& request) {
  if (!prompt_text_applies(policy, request)) return false;
  const prompt_text::Model* model =
      config.models != nullptr ? config.models->find(request.model_id()) : nullptr;
  if (model == nullptr) return fail(PromptTextFailure::kNoTokenizer);
  if (request.prompt_text().size() > config.max_prompt_bytes)
    return fail(PromptTextFailure::kTooLong);
  const std::int64_t start = ctx.start_mono_us >= 0 ? ctx.start_mono_us : clock.monotonic_us();
  const std::int64_t budget = policy.lookup_timeout_ms > 0
                                  ? std::int64_t{policy.lookup_timeout_ms} * 1000
                                  : config.default_budget_us;
  const std::int64_t end = std::min(ctx.deadline_mono_us, start + budget);
  const auto expired = [&clock, end] { return clock.monotonic_us() >= end; };
  thread_local std::vector<std::uint32_t> tokens;
  switch (prompt_text::encode_prompt(*model, request.prompt_text(), expired, tokens)) {
    case prompt_text::EncodeResult::kOk:
      break;
    case prompt_text::EncodeResult::kTemplate:
      return fail(PromptTextFailure::kTemplate);
    case prompt_text::EncodeResult::kTimeout:
      return fail(PromptTextFailure::kTimeout);
    case prompt_text::EncodeResult::kTokenize:
      return fail(PromptTextFailure::kTokenize);
  }
  if (tokens.size() > config.max_token_ids) return fail(PromptTextFailure::kTooLong);
  request.mutable_token_ids()->Assign(tokens.begin(), tokens.end());
  request.clear_prompt_text();
  return true;
}

}  // namespace ic::service
