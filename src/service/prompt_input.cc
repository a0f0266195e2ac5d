#include "service/prompt_input.hh"

#include <algorithm>
#include <vector>

#include "metrics/registry.hh"
#include "tokenizer/utf8.hh"

namespace ic::service {
namespace {

using metrics::PromptTextFailure;

// Whether step 5 would resolve this request's prompt_text (docs/lookup.md);
// `has_text`: it has one (a removed invalid one counts).
bool prompt_text_applies(const config::CachePolicy& policy,
                         const ::inferencecache::v1alpha1::LookupRouteRequest& r, bool has_text) {
  if (!has_text || r.token_ids_size() > 0 || !r.prefix_hash().empty()) return false;
  if (r.tenant_id() == config::kReservedTenant) return false;
  const bool arrays = r.block_hashes_size() > 0 || r.block_token_counts_size() > 0;
  if (arrays && policy.enable_chain_matching) return false;  // a chain (or malformed arrays) wins
  const bool wire_chain =
      r.block_hashes_size() > 0 && r.block_hashes_size() == r.block_token_counts_size();
  return !(policy.require_chain && !wire_chain);  // else POLICY_REQUIRES_CHAIN comes first
}

// Protobuf's wire format: a varint at bytes[i] (advances i); false when
// truncated or longer than 10 bytes.
bool read_varint(std::string_view bytes, std::size_t& i, std::uint64_t& out) {
  out = 0;
  for (int shift = 0; shift < 70 && i < bytes.size(); shift += 7) {
    const auto b = static_cast<unsigned char>(bytes[i++]);
    out |= std::uint64_t{b & 0x7Fu} << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// The end of the field whose tag was read (wire type `type`) at bytes[i],
// or npos when it cannot be walked (groups, truncation).
std::size_t field_end(std::string_view bytes, std::size_t i, unsigned type) {
  std::uint64_t len = 0;
  switch (type) {
    case 0:
      return read_varint(bytes, i, len) ? i : std::string_view::npos;
    case 1:
      return bytes.size() - i >= 8 ? i + 8 : std::string_view::npos;
    case 5:
      return bytes.size() - i >= 4 ? i + 4 : std::string_view::npos;
    case 2:
      if (!read_varint(bytes, i, len) || len > bytes.size() - i) return std::string_view::npos;
      return i + len;
    default:
      return std::string_view::npos;
  }
}

PromptPlan fail(PromptTextFailure reason) {
  metrics::local().add_prompt_text_failure(reason);
  return {};
}

}  // namespace

PromptPlan plan_prompt_text(const PromptTextConfig& config, const config::CachePolicy& policy,
                            index::Clock& clock, const index::LookupContext& ctx,
                            const ::inferencecache::v1alpha1::LookupRouteRequest& request) {
  if (!prompt_text_applies(policy, request, !request.prompt_text().empty())) return {};
  const prompt_text::Model* model =
      config.models != nullptr ? config.models->find(request.model_id()) : nullptr;
  if (model == nullptr) return fail(PromptTextFailure::kNoTokenizer);
  if (request.prompt_text().size() > config.max_prompt_bytes)
    return fail(PromptTextFailure::kTooLong);
  const std::int64_t start = ctx.start_mono_us >= 0 ? ctx.start_mono_us : clock.monotonic_us();
  const std::int64_t budget = policy.lookup_timeout_ms > 0
                                  ? std::int64_t{policy.lookup_timeout_ms} * 1000
                                  : config.default_budget_us;
  return {model, std::min(ctx.deadline_mono_us, start + budget)};
}

PromptTokenizing::PromptTokenizing(const PromptTextConfig& config, const PromptPlan& plan,
                                   std::string_view text)
    : config_(config), deadline_(plan.deadline_mono_us), encoding_(*plan.model, text, tokens_) {}

void PromptTokenizing::fail(PromptTextFailure reason) {
  if (done_) return;
  done_ = true;
  ok_ = false;
  metrics::local().add_prompt_text_failure(reason);
}

bool PromptTokenizing::run_slice(index::Clock& clock, std::int64_t slice_end_mono_us) {
  if (done_) return true;
  const std::int64_t start = clock.monotonic_us();
  if (start >= deadline_) {
    fail(PromptTextFailure::kTimeout);
    return true;
  }
  const std::int64_t stop_at =
      std::min({slice_end_mono_us, deadline_, start + (config_.max_cpu_us - cpu_us_)});
  std::int64_t now = start;
  const prompt_text::EncodeResult r = encoding_.step([&] {
    now = clock.monotonic_us();
    return now >= stop_at;
  });
  cpu_us_ += std::max<std::int64_t>(0, now - start);
  switch (r) {
    case prompt_text::EncodeResult::kOk:
      if (tokens_.size() > config_.max_token_ids) {
        fail(PromptTextFailure::kTooLong);
        return true;
      }
      done_ = ok_ = true;
      return true;
    case prompt_text::EncodeResult::kPaused:
      if (now >= deadline_) {
        fail(PromptTextFailure::kTimeout);
      } else if (cpu_us_ >= config_.max_cpu_us) {
        fail(PromptTextFailure::kCpuBudget);
      }
      return done_;
    case prompt_text::EncodeResult::kTemplate:
      fail(PromptTextFailure::kTemplate);
      return true;
    case prompt_text::EncodeResult::kTooLong:
      fail(PromptTextFailure::kTooLong);
      return true;
    case prompt_text::EncodeResult::kTimeout:
      fail(PromptTextFailure::kTimeout);
      return true;
    case prompt_text::EncodeResult::kTokenize:
      break;
  }
  fail(PromptTextFailure::kTokenize);
  return true;
}

void apply_prompt_tokens(const std::vector<std::uint32_t>& tokens,
                         ::inferencecache::v1alpha1::LookupRouteRequest& request) {
  request.mutable_token_ids()->Assign(tokens.begin(), tokens.end());
  request.clear_prompt_text();
}

bool drop_invalid_prompt_text(std::string& bytes) {
  constexpr std::uint64_t kPromptTextTag = (10 << 3) | 2;
  // Pass 1: the top-level fields as (start, value, end); any invalid text?
  struct Field {
    std::size_t start, value, end;
  };
  std::vector<Field> texts;
  bool invalid = false;
  for (std::size_t i = 0; i < bytes.size();) {
    const std::size_t start = i;
    std::uint64_t tag = 0;
    if (!read_varint(bytes, i, tag)) return false;
    const std::size_t end = field_end(bytes, i, static_cast<unsigned>(tag & 7));
    if (end == std::string_view::npos) return false;
    if (tag == kPromptTextTag) {
      std::size_t value = i;
      std::uint64_t len = 0;
      read_varint(bytes, value, len);
      texts.push_back({start, value, end});
      invalid = invalid || !tokenizer::valid_utf8(std::string_view(bytes).substr(value, len));
    }
    i = end;
  }
  if (!invalid) return false;
  // Pass 2: every occurrence goes (the last one, the value protobuf would
  // keep, may be a valid one after an invalid one: the message is still bad).
  std::string kept;
  std::size_t copied = 0;
  for (const Field& f : texts) {
    kept.append(bytes, copied, f.start - copied);
    copied = f.end;
  }
  kept.append(bytes, copied, std::string::npos);
  bytes.swap(kept);
  return true;
}

void count_invalid_prompt_text(const PromptTextConfig& config, const config::CachePolicy& policy,
                               const ::inferencecache::v1alpha1::LookupRouteRequest& request) {
  if (!prompt_text_applies(policy, request, true)) return;
  const bool model = config.models != nullptr && config.models->find(request.model_id()) != nullptr;
  fail(model ? PromptTextFailure::kTokenize : PromptTextFailure::kNoTokenizer);
}

bool resolve_prompt_text(const PromptTextConfig& config, const config::CachePolicy& policy,
                         index::Clock& clock, const index::LookupContext& ctx,
                         ::inferencecache::v1alpha1::LookupRouteRequest& request) {
  const PromptPlan plan = plan_prompt_text(config, policy, clock, ctx, request);
  if (plan.model == nullptr) return false;
  PromptTokenizing job(config, plan, request.prompt_text());
  while (!job.run_slice(clock, INT64_MAX)) {
  }
  if (!job.ok()) return false;
  apply_prompt_tokens(job.tokens(), request);
  return true;
}

}  // namespace ic::service
