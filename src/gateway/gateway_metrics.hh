#pragma once
// The endpoint picker's counts in this core's metrics (metrics::local();
// docs/gateway.md "Metrics"): picks by reason, fail-open picks by why, the
// pick-latency histogram, and which endpoint served.

#include <cstdint>

#include "gateway/openai_body.hh"
#include "gateway/picker.hh"
#include "gateway/prompt_tokens.hh"
#include "metrics/labels.hh"

namespace ic::gateway {

// Why a pick went by load although a body came (kNone: it did not).
enum class FailOpen : std::uint8_t {
  kNone,
  kNotJson,
  kNoModel,
  kNoPrompt,
  kUnknownModel,
  kTemplate,
  kTokenize,
  kTooLong,
  kTimeout,
  kBodyTooLarge,
  kNoBody,
};
FailOpen fail_open_of(BodyError error);
FailOpen fail_open_of(TokensError error);

enum class Served : std::uint8_t { kPicked, kFallback };

// One pick made (latency µs from the body's end to the answer).
void record_pick(PickReason reason, FailOpen why, std::int64_t latency_us);
// A picked request's response began `ttft_us` after the pick was sent.
void record_served(Served served, std::int64_t ttft_us);

}  // namespace ic::gateway
