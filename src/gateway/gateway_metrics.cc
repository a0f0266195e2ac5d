#include "gateway/gateway_metrics.hh"

#include <algorithm>
#include <string>
#include <string_view>

#include "metrics/core_metrics.hh"

namespace ic::gateway {

namespace {
// Written once before the reactors start (their threads' start orders it
// before every read); default: unregistered, counts nothing.
metrics::CoreFamilyId<GatewayFigures> g_gateway;

std::string_view to_label(PickReason pick) {
  static constexpr std::array<std::string_view, kPickReasonCount> kNames = {
      "prefix_match", "ranked", "load", "fail_open", "no_endpoint", "shed"};
  return kNames[static_cast<std::size_t>(pick)];
}

std::string_view to_label(FailOpen reason) {
  static constexpr std::array<std::string_view, kFailOpenCount> kNames = {
      "not_json", "no_model", "no_prompt",      "unknown_model", "template", "tokenize",
      "too_long", "timeout",  "body_too_large", "no_body",       "busy"};
  return kNames[static_cast<std::size_t>(reason)];
}

std::string_view to_label(Served served) {
  return served == Served::kPicked ? "picked" : "fallback";
}
}  // namespace

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

void GatewayFigures::add_pick(PickReason reason, std::optional<FailOpen> why,
                              std::int64_t latency_us) {
  ++picks[static_cast<std::size_t>(reason)];
  if (why) ++fail_open[static_cast<std::size_t>(*why)];
  const std::int64_t us = std::max<std::int64_t>(latency_us, 0);
  // First bound ≥ us; past the last bound only `count` (the +Inf bucket) sees it.
  const auto bound =
      std::lower_bound(metrics::kLatencyBucketsUs.begin(), metrics::kLatencyBucketsUs.end(), us);
  if (bound != metrics::kLatencyBucketsUs.end()) {
    ++buckets[static_cast<std::size_t>(bound - metrics::kLatencyBucketsUs.begin())];
  }
  ++count;
  sum_us += static_cast<std::uint64_t>(us);
}

void GatewayFigures::merge(const GatewayFigures& other) {
  for (std::size_t i = 0; i < picks.size(); ++i) picks[i] += other.picks[i];
  for (std::size_t i = 0; i < fail_open.size(); ++i) fail_open[i] += other.fail_open[i];
  for (std::size_t i = 0; i < served.size(); ++i) served[i] += other.served[i];
  for (std::size_t i = 0; i < buckets.size(); ++i) buckets[i] += other.buckets[i];
  count += other.count;
  sum_us += other.sum_us;
}

void GatewayFigures::render(metrics::Writer& w) const {
  w.family("gateway_picks_total", "counter",
           "Endpoint picker (ext_proc) picks by why the first endpoint was chosen.");
  for (std::size_t r = 0; r < kPickReasonCount; ++r) {
    w.sample("gateway_picks_total", {{"reason", to_label(static_cast<PickReason>(r))}}, picks[r]);
  }
  w.family("gateway_fail_open_total", "counter",
           "Endpoint picker picks made by load because the body gave no token ids, by reason.");
  for (std::size_t r = 0; r < kFailOpenCount; ++r) {
    w.sample("gateway_fail_open_total", {{"reason", to_label(static_cast<FailOpen>(r))}},
             fail_open[r]);
  }
  w.family(
      "gateway_served_total", "counter",
      "Picked requests whose response began, by the endpoint that served (picked or a fallback).");
  for (std::size_t r = 0; r < kServedCount; ++r) {
    w.sample("gateway_served_total", {{"endpoint", to_label(static_cast<Served>(r))}}, served[r]);
  }
  w.family("gateway_pick_latency_seconds", "histogram",
           "Endpoint picker pick latency (body parsed, tokenized, looked up) in seconds.");
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b < metrics::kLatencyBucketCount; ++b) {
    cumulative += buckets[b];
    const std::string le =
        metrics::format_double(static_cast<double>(metrics::kLatencyBucketsUs[b]) / 1e6);
    w.sample("gateway_pick_latency_seconds", {{"le", le}}, cumulative, "_bucket");
  }
  w.sample("gateway_pick_latency_seconds", {{"le", "+Inf"}}, count, "_bucket");
  w.sample("gateway_pick_latency_seconds", {}, static_cast<double>(sum_us) / 1e6, "_sum");
  w.sample("gateway_pick_latency_seconds", {}, count, "_count");
}

void register_gateway_metrics(metrics::Registry& registry) {
  g_gateway = registry.add_core_family<GatewayFigures>(metrics::RenderAfter::kPromptTextFailures);
}

void record_pick(PickReason reason, std::optional<FailOpen> why, std::int64_t latency_us) {
  if (GatewayFigures* g = metrics::local().family(g_gateway)) g->add_pick(reason, why, latency_us);
}

void record_served(Served served) {
  if (GatewayFigures* g = metrics::local().family(g_gateway)) {
    ++g->served[static_cast<std::size_t>(served)];
  }
}

}  // namespace ic::gateway
