#pragma once
// LookupRoute's prompt_text input, resolved on the connection's core before
// the hop to the tenant's owner core (docs/lookup.md step 5,
// docs/prompt-text.md): the owner only ever sees token ids.
//
// Applies when prompt_text is the input step 5 would pick: no prefix_hash,
// no token_ids, no block arrays unless the tenant's policy disables chain
// matching, not the reserved tenant, and requireChain satisfied. Then the
// model's chat template and tokenizer turn the text into token_ids (the
// request's prompt_text is cleared) and the lookup runs as token_ids with
// the tokens echoed. Any failure leaves the request as it was, so the index
// answers its fail-open NO_HINT (or TIMEOUT once the caller's deadline has
// passed), and counts inferencecache_prompt_text_failures_total{reason}.
//
// Tokenizing runs on the reactor, bounded by the tighter of the caller's
// grpc-timeout and the tenant's lookupTimeoutMs, or by default_budget_us
// when the tenant sets none.

#include <cstddef>
#include <cstdint>

#include "config/policy.hh"
#include "index/clock.hh"
#include "index/shard.hh"
#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "prompt_text/models.hh"

namespace ic::service {

// Tokenizing budget of a prompt_text lookup whose tenant has no
// lookupTimeoutMs (µs): about 1 MiB of text at the benchmarked rate.
inline constexpr std::int64_t kDefaultPromptBudgetUs = 100'000;

struct PromptTextConfig {
  // Models of --tokenizer-models-dir; nullptr or empty: every prompt_text
  // fails open (reason no_tokenizer). Outlives the servers.
  const prompt_text::ModelSet* models = nullptr;
  std::size_t max_prompt_bytes = 1 << 20;  // longer text fails open (too_long)
  std::size_t max_token_ids = 1'048'576;   // more tokens fail open (too_long)
  std::int64_t default_budget_us = kDefaultPromptBudgetUs;
};

// True when `request.token_ids` now hold the tokens of its prompt_text (set
// ctx.token_ids_from_prompt from it). `policy` is the tenant's; `ctx` gives
// the start and the caller's deadline.
bool resolve_prompt_text(const PromptTextConfig& config, const config::CachePolicy& policy,
                         index::Clock& clock, const index::LookupContext& ctx,
                         ::inferencecache::v1alpha1::LookupRouteRequest& request);

}  // namespace ic::service
