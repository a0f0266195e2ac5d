#pragma once
// Closed label sets of the metrics contract (docs/admin.md "Metrics"): each
// enum indexes a fixed array in CoreMetrics, so the hot path never hashes or
// allocates for these labels. to_label() gives the exact label value.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ic::metrics {

// LookupRoute reason codes (docs/lookup.md). kOther counts a code outside
// the contract (never produced by a correct server; rendered as "OTHER").
enum class Reason : std::uint8_t {
  kPrefixMatch,
  kTenantHot,
  kAffinityHint,
  kNoHint,
  kPolicyRequiresChain,
  kTimeout,
  kUnknownTenant,
  kUnknownModel,
  kUnknownHashScheme,
  kOther,
};
inline constexpr std::size_t kReasonCount = 10;
// "PREFIX_MATCH", ... exactly as sent in LookupRouteResponse.reason_code.
std::string_view to_label(Reason reason);
// Maps a reason_code string to its enum; unknown strings give Reason::kOther.
Reason reason_from_code(std::string_view code);

// CacheEvent.Type (docs/contract.md "Enums"), counted per wire value: slots
// 0..4 are the contract's types in its own numbering, slot 5 any other value.
// Labels: "TYPE_UNSPECIFIED", "PREFIX_ADDED", ..., "ALL_CLEARED", "UNKNOWN".
inline constexpr std::size_t kEventTypeCount = 6;
// The slot of a CacheEvent.type wire value: itself for 0..4, else 5.
std::size_t event_slot(int wire_value);
// The label of a slot (0..kEventTypeCount-1).
std::string_view event_label(std::size_t slot);

// inferencecache_index_evictions_total{algorithm}: "lru" | "lfu".
enum class EvictionAlgorithm : std::uint8_t { kLru, kLfu };
inline constexpr std::size_t kEvictionAlgorithmCount = 2;
std::string_view to_label(EvictionAlgorithm algorithm);

// inferencecache_index_evictions_total{reason}: "cap" | "ttl".
enum class EvictionReason : std::uint8_t { kCap, kTtl };
inline constexpr std::size_t kEvictionReasonCount = 2;
std::string_view to_label(EvictionReason reason);

// Which control endpoint an auth outcome belongs to: snapshot counts in
// inferencecache_snapshot_auth_total, policy in inferencecache_policy_auth_total.
enum class AuthEndpoint : std::uint8_t { kSnapshot, kPolicy };
inline constexpr std::size_t kAuthEndpointCount = 2;

// {result}: "ok" (token matched or auth disabled), "unauth" (401: header
// missing or not Bearer), "forbidden" (403: wrong token), "error" (token file
// unreadable or empty: the server cannot decide, answers 503).
enum class AuthResult : std::uint8_t { kOk, kUnauth, kForbidden, kError };
inline constexpr std::size_t kAuthResultCount = 4;
std::string_view to_label(AuthResult result);

// Listener of a connection, for inferencecache_open_connections{listener}:
// "grpc", "http", "control".
enum class Listener : std::uint8_t { kGrpc, kHttp, kControl };
inline constexpr std::size_t kListenerCount = 3;
std::string_view to_label(Listener listener);

// Where a policy snapshot came from, for inferencecache_policy_reloads_total
// {source}: "http" (POST|PUT /policy) or "file" (--policy-file).
enum class PolicySource : std::uint8_t { kHttp, kFile };
inline constexpr std::size_t kPolicySourceCount = 2;
std::string_view to_label(PolicySource source);

// Why a prompt_text lookup failed open (docs/prompt-text.md "Failure
// modes"), for inferencecache_prompt_text_failures_total{reason}:
// "no_tokenizer" (no model loaded under the request's model_id), "too_long"
// (text, tokens, one pre-token or an NFC stretch over its bound), "template"
// (the chat template's render failed), "tokenize" (the tokenizer gave up:
// invalid UTF-8, regex limit), "timeout" (the lookup deadline passed while
// tokenizing), "busy" (the core's or the tenant's queue of prompts being
// tokenized is full), "cpu_budget" (tokenizing took more than the per-call
// CPU budget).
enum class PromptTextFailure : std::uint8_t {
  kNoTokenizer,
  kTooLong,
  kTemplate,
  kTokenize,
  kTimeout,
  kBusy,
  kCpuBudget
};
inline constexpr std::size_t kPromptTextFailureCount = 7;
std::string_view to_label(PromptTextFailure failure);

}  // namespace ic::metrics
