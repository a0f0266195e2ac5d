#include "metrics/labels.hh"

#include <array>

namespace ic::metrics {

namespace {
constexpr std::array<std::string_view, kReasonCount> kReasonLabels = {
    "PREFIX_MATCH",          "TENANT_HOT", "AFFINITY_HINT",  "NO_HINT",
    "POLICY_REQUIRES_CHAIN", "TIMEOUT",    "UNKNOWN_TENANT", "UNKNOWN_MODEL",
    "UNKNOWN_HASH_SCHEME",   "OTHER"};
constexpr std::array<std::string_view, kEventTypeCount> kEventLabels = {
    "TYPE_UNSPECIFIED", "PREFIX_ADDED", "PREFIX_EVICTED",
    "REPLICA_UPDATED",  "ALL_CLEARED",  "UNKNOWN"};
}  // namespace

std::string_view to_label(Reason reason) { return kReasonLabels[static_cast<std::size_t>(reason)]; }

Reason reason_from_code(std::string_view code) {
  // The hot path passes the codes the service produced; a linear compare over
  // nine short literals is cheaper than hashing.
  for (std::size_t i = 0; i + 1 < kReasonCount; ++i) {
    if (kReasonLabels[i] == code) return static_cast<Reason>(i);
  }
  return Reason::kOther;
}

std::size_t event_slot(int wire_value) {
  if (wire_value < 0 || wire_value >= static_cast<int>(kEventTypeCount) - 1) {
    return kEventTypeCount - 1;
  }
  return static_cast<std::size_t>(wire_value);
}

std::string_view event_label(std::size_t slot) { return kEventLabels[slot]; }

std::string_view to_label(EvictionAlgorithm algorithm) {
  return algorithm == EvictionAlgorithm::kLru ? "lru" : "lfu";
}

std::string_view to_label(EvictionReason reason) {
  return reason == EvictionReason::kCap ? "cap" : "ttl";
}

std::string_view to_label(AuthResult result) {
  constexpr std::array<std::string_view, kAuthResultCount> kLabels = {"ok", "unauth", "forbidden",
                                                                      "error"};
  return kLabels[static_cast<std::size_t>(result)];
}

std::string_view to_label(Listener listener) {
  constexpr std::array<std::string_view, kListenerCount> kLabels = {"grpc", "http", "control"};
  return kLabels[static_cast<std::size_t>(listener)];
}

std::string_view to_label(PromptTextFailure failure) {
  static constexpr std::array<std::string_view, kPromptTextFailureCount> kNames = {
      "no_tokenizer", "too_long", "template", "tokenize", "timeout", "busy", "cpu_budget"};
  return kNames[static_cast<std::size_t>(failure)];
}

std::string_view to_label(PolicySource source) {
  return source == PolicySource::kHttp ? "http" : "file";
}

}  // namespace ic::metrics
