#include "gateway/gateway_metrics.hh"

#include <optional>

#include "metrics/registry.hh"

namespace ic::gateway {

FailOpen fail_open_of(BodyError error) {
  switch (error) {
    case BodyError::kNone:
      return FailOpen::kNone;
    case BodyError::kNotJson:
      return FailOpen::kNotJson;
    case BodyError::kNoModel:
      return FailOpen::kNoModel;
    case BodyError::kNoPrompt:
      return FailOpen::kNoPrompt;
  }
  return FailOpen::kNotJson;
}

FailOpen fail_open_of(TokensError error) {
  switch (error) {
    case TokensError::kNone:
      return FailOpen::kNone;
    case TokensError::kUnknownModel:
      return FailOpen::kUnknownModel;
    case TokensError::kTemplate:
      return FailOpen::kTemplate;
    case TokensError::kTokenize:
      return FailOpen::kTokenize;
    case TokensError::kTooLong:
      return FailOpen::kTooLong;
    case TokensError::kTimeout:
      return FailOpen::kTimeout;
  }
  return FailOpen::kTokenize;
}

void record_pick(PickReason reason, FailOpen why, std::int64_t latency_us) {
  std::optional<metrics::GatewayFailOpen> label;
  // FailOpen's values after kNone are GatewayFailOpen's, in the same order.
  if (why != FailOpen::kNone)
    label = static_cast<metrics::GatewayFailOpen>(static_cast<std::uint8_t>(why) - 1);
  metrics::local().record_gateway_pick(static_cast<metrics::GatewayPick>(reason), label,
                                       latency_us);
}

void record_served(Served served, std::int64_t /*ttft_us*/) {
  metrics::local().add_gateway_served(served == Served::kPicked ? metrics::GatewayServed::kPicked
                                                                 : metrics::GatewayServed::kFallback);
}

}  // namespace ic::gateway
