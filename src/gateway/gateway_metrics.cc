#include "gateway/gateway_metrics.hh"

#include "metrics/registry.hh"

namespace ic::gateway {

std::optional<FailOpen> fail_open_of(BodyError error) {
  switch (error) {
    case BodyError::kNone:
      return std::nullopt;
    case BodyError::kNotJson:
      return FailOpen::kNotJson;
    case BodyError::kNoModel:
      return FailOpen::kNoModel;
    case BodyError::kNoPrompt:
      return FailOpen::kNoPrompt;
  }
  return FailOpen::kNotJson;
}

std::optional<FailOpen> fail_open_of(TokensError error) {
  switch (error) {
    case TokensError::kNone:
      return std::nullopt;
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

void record_pick(PickReason reason, std::optional<FailOpen> why, std::int64_t latency_us) {
  metrics::local().record_gateway_pick(reason, why, latency_us);
}

void record_served(Served served) {
  metrics::local().add_gateway_served(served == Served::kPicked
                                          ? metrics::GatewayServed::kPicked
                                          : metrics::GatewayServed::kFallback);
}

}  // namespace ic::gateway
