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
// Tokenizing is bounded by the tighter of the caller's grpc-timeout and the
// tenant's lookupTimeoutMs (or default_budget_us when the tenant sets none),
// and by max_cpu_us of work. The server runs it in slices of at most
// slice_us, one per reactor turn (prompt_text/scheduler.hh), so no turn
// spends longer than about a slice on one request's tokenization.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config/policy.hh"
#include "index/clock.hh"
#include "index/shard.hh"
#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "metrics/labels.hh"
#include "prompt_text/encoder.hh"
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
  // Work one call's tokenizing may take, summed over its slices (µs of the
  // reactor's time); past it the call fails open (cpu_budget).
  std::int64_t max_cpu_us = 50'000;
  // Longest slice of one call's tokenizing per reactor turn (µs; a slice
  // stops at the first poll after it, a few µs later).
  std::int64_t slice_us = 500;
  // Calls being tokenized per core, and per tenant per core; one more fails
  // open at once (busy).
  std::size_t max_jobs_per_core = 64;
  std::size_t max_jobs_per_tenant = 8;
};

// What resolving one request's prompt_text needs: the model, or nullptr when
// prompt_text does not apply or already failed open (counted).
struct PromptPlan {
  const prompt_text::Model* model = nullptr;
  std::int64_t deadline_mono_us = 0;  // tokenizing stops here (timeout)
};

// Decides at once (no tokenizing): whether the request's prompt_text applies
// and can be tokenized. `policy` is the tenant's; `ctx` gives the start and
// the caller's deadline. Counts no_tokenizer and too_long.
PromptPlan plan_prompt_text(const PromptTextConfig& config, const config::CachePolicy& policy,
                            index::Clock& clock, const index::LookupContext& ctx,
                            const ::inferencecache::v1alpha1::LookupRouteRequest& request);

// The tokenizing of one planned prompt, run in slices. `text` (the request's
// prompt_text) and `config` outlive it.
class PromptTokenizing {
 public:
  PromptTokenizing(const PromptTextConfig& config, const PromptPlan& plan, std::string_view text);
  PromptTokenizing(const PromptTokenizing&) = delete;
  PromptTokenizing& operator=(const PromptTokenizing&) = delete;

  // Runs until done or until `clock` reads `slice_end_mono_us`; true when
  // done (then ok() and tokens() tell the outcome). A slice started after
  // the deadline, or over max_cpu_us, ends it failed open.
  bool run_slice(index::Clock& clock, std::int64_t slice_end_mono_us);
  // Ends it failed open with `reason` (counted once), unless already done.
  void fail(metrics::PromptTextFailure reason);
  bool done() const { return done_; }
  // Done and the tokens are the prompt's (not counted as a failure).
  bool ok() const { return ok_; }
  const std::vector<std::uint32_t>& tokens() const { return tokens_; }
  // Work so far (µs, summed over slices).
  std::int64_t cpu_us() const { return cpu_us_; }

 private:
  const PromptTextConfig& config_;
  std::int64_t deadline_;
  std::vector<std::uint32_t> tokens_;
  prompt_text::PromptEncoding encoding_;
  std::int64_t cpu_us_ = 0;
  bool done_ = false;
  bool ok_ = false;
};

// Sets token_ids from a successful tokenizing and clears prompt_text.
void apply_prompt_tokens(const std::vector<std::uint32_t>& tokens,
                         ::inferencecache::v1alpha1::LookupRouteRequest& request);

// A prompt_text that is not valid UTF-8 fails open (docs/prompt-text.md:
// nothing on this path answers a gRPC error), but protobuf refuses to parse
// a string field that is not UTF-8. When a prompt_text field (10) of
// `bytes` (one serialized LookupRouteRequest, top-level fields) is not valid
// UTF-8, removes every prompt_text field and returns true, so the rest
// parses and the lookup goes on without it. False (unchanged) for
// bytes it cannot walk: protobuf then answers INVALID_ARGUMENT as before.
bool drop_invalid_prompt_text(std::string& bytes);

// Counts the prompt_text that drop_invalid_prompt_text() removed from
// `request` when prompt_text would have been the lookup's input (step 5 of
// docs/lookup.md): `tokenize`, or `no_tokenizer` without the model.
void count_invalid_prompt_text(const PromptTextConfig& config, const config::CachePolicy& policy,
                               const ::inferencecache::v1alpha1::LookupRouteRequest& request);

// In one go (tests, tools): plan, tokenize to the end (bounded by the same
// deadline and CPU budget), apply. True when `request.token_ids` now hold
// the tokens of its prompt_text (set ctx.token_ids_from_prompt from it).
bool resolve_prompt_text(const PromptTextConfig& config, const config::CachePolicy& policy,
                         index::Clock& clock, const index::LookupContext& ctx,
                         ::inferencecache::v1alpha1::LookupRouteRequest& request);

}  // namespace ic::service
