#pragma once
// The endpoint picker's counts in this core's metrics (metrics::local();
// docs/gateway.md "Metrics"): picks by reason, fail-open picks by why, the
// pick-latency histogram, and which endpoint served.

#include <cstdint>
#include <optional>

#include "gateway/openai_body.hh"
#include "gateway/picker.hh"
#include "gateway/prompt_tokens.hh"
#include "metrics/labels.hh"

namespace ic::gateway {

// Why a pick went by load although a request came (metrics/labels.hh).
using FailOpen = metrics::GatewayFailOpen;
// nullopt for kNone.
std::optional<FailOpen> fail_open_of(BodyError error);
std::optional<FailOpen> fail_open_of(TokensError error);

enum class Served : std::uint8_t { kPicked, kFallback };

// One pick made (latency µs from the body's end to the answer); `why` set
// when the body gave no token ids.
void record_pick(PickReason reason, std::optional<FailOpen> why, std::int64_t latency_us);
// A picked request's response began.
void record_served(Served served);

}  // namespace ic::gateway
