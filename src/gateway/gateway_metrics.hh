#pragma once
// The endpoint picker's families (docs/gateway.md "Metrics"):
// inferencecache_gateway_picks_total{reason}, _fail_open_total{reason},
// _served_total{endpoint} and the gateway_pick_latency_seconds histogram,
// counted per core. The gateway room owns them and registers them with the
// metrics Registry (metrics/group.hh CoreFamily: a histogram beside counters).

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "gateway/openai_body.hh"
#include "gateway/picker.hh"
#include "gateway/prompt_tokens.hh"
#include "metrics/exposition.hh"
#include "metrics/registry.hh"
#include "metrics/sample.hh"

namespace ic::gateway {

// Why a body gave no token ids, for inferencecache_gateway_fail_open_total
// {reason}: "not_json", "no_model", "no_prompt", "unknown_model" (no
// tokenizer for it), "template", "tokenize", "too_long", "timeout",
// "body_too_large", "no_body", "busy" (the core's tokenizing scheduler was
// full for the core or the tenant, prompt_text/scheduler.hh).
enum class FailOpen : std::uint8_t {
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
  kBusy
};
inline constexpr std::size_t kFailOpenCount = 11;
// nullopt for kNone.
std::optional<FailOpen> fail_open_of(BodyError error);
std::optional<FailOpen> fail_open_of(TokensError error);

// Which endpoint served a picked request, for
// inferencecache_gateway_served_total{endpoint}: "picked" (the first one
// named) or "fallback" (another, the gateway's retry).
enum class Served : std::uint8_t { kPicked, kFallback };
inline constexpr std::size_t kServedCount = 2;

// One core's counts of the families (a metrics CoreFamily value).
struct GatewayFigures {
  std::array<std::uint64_t, kPickReasonCount> picks{};    // by PickReason
  std::array<std::uint64_t, kFailOpenCount> fail_open{};  // by FailOpen
  std::array<std::uint64_t, kServedCount> served{};       // by Served
  // Pick latency (body parsed, tokenized, looked up; µs) in the buckets of
  // metrics::kLatencyBucketsUs, non-cumulative; over the last bound only
  // `count` sees it.
  std::array<std::uint64_t, metrics::kLatencyBucketCount> buckets{};
  std::uint64_t count = 0;   // observations (the +Inf bucket)
  std::uint64_t sum_us = 0;  // total latency, µs

  // One pick (latency µs; negative counts as 0).
  void add_pick(PickReason reason, std::optional<FailOpen> why, std::int64_t latency_us);
  // Sums another core's counts into these.
  void merge(const GatewayFigures& other);
  // The four families, every label value shown.
  void render(metrics::Writer& w) const;
};

// Registers the families with `registry`; once, before the runtime starts.
void register_gateway_metrics(metrics::Registry& registry);

// One pick made (latency µs from the body's end to the answer); `why` set
// when the body gave no token ids. On the calling core (metrics::local());
// nothing before register_gateway_metrics ran.
void record_pick(PickReason reason, std::optional<FailOpen> why, std::int64_t latency_us);
// A picked request's response began.
void record_served(Served served);

}  // namespace ic::gateway
