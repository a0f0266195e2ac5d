#include "replay/report.hh"

#include <cmath>
#include <cstdio>
#include <limits>

#include "common/latency.hh"
#include "replay/chart.hh"

namespace ic::tools::replay {
namespace {

std::string printf_string(const char* format, auto... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, format, args...);
  return buffer;
}

std::vector<double> window_ratios(const PolicyAccount& account) {
  std::vector<double> values;
  for (const auto& w : account.windows()) {
    values.push_back(w.prompt_tokens == 0 ? std::numeric_limits<double>::quiet_NaN()
                                          : static_cast<double>(w.hit_tokens) /
                                                static_cast<double>(w.prompt_tokens));
  }
  return values;
}

// Mean TTFT (s) of the requests that arrived in each window; NaN for an empty window.
std::vector<double> window_ttft_s(const PolicyAccount& account) {
  std::vector<double> values;
  for (const auto& w : account.windows()) {
    std::int64_t requests = 0;
    for (auto n : w.requests) requests += n;
    values.push_back(requests == 0 ? std::numeric_limits<double>::quiet_NaN()
                                   : w.ttft_ms_sum / 1000.0 / static_cast<double>(requests));
  }
  return values;
}

std::string rates_text(const ReplayOptions& options) {
  std::string out;
  for (std::size_t i = 0; i < options.prefill_rates.size(); ++i) {
    out += printf_string("%s%.0f", i == 0 ? "" : ",", options.prefill_rates[i]);
  }
  return out;
}

// Events running this late (p99, in trace time) behind their wall time distort what the server
// sees: a warning is printed.
constexpr double kLagWarningTraceMs = 250;

std::string clock_text(const ReplayResult& result, const ReplayOptions& options) {
  if (!result.paced) return printf_string("virtual time (%.1f s of wall time)", result.wall_s);
  auto lag = result.lag_us;
  const auto summary = summarize(lag);
  std::string out = printf_string(
      "wall clock at trace time / %.2f (%.1f s; events late by p99 %.1f ms, max %.1f ms)",
      options.speed, result.wall_s, static_cast<double>(summary.p99_us) / 1000.0,
      static_cast<double>(summary.max_us) / 1000.0);
  const double p99_trace_ms = static_cast<double>(summary.p99_us) / 1000.0 * options.speed;
  if (p99_trace_ms > kLagWarningTraceMs) {
    out += printf_string(
        "\n  WARNING: p99 lag = %.0f ms of trace time: the server saw a distorted time line "
        "(a busy machine or a stalled call); rerun, or lower --speed",
        p99_trace_ms);
  }
  return out;
}

std::string stats_text(const ReplayOptions& options) {
  if (options.stats_interval_ms <= 0) return "none (KV events only)";
  return printf_string("every %.3g s of trace time, pressure %s",
                       static_cast<double>(options.stats_interval_ms) / 1000.0,
                       options.report_pressure
                           ? printf_string("= outstanding requests / %d", options.slots).c_str()
                           : "0");
}

double seconds(std::uint64_t us) { return static_cast<double>(us) / 1e6; }

}  // namespace

std::string render_text(const ReplayResult& result, const ReplayOptions& options,
                        const RunInfo& info) {
  std::string out;
  out += printf_string("inferencecache-replay: %s\n", info.trace_path.c_str());
  out += printf_string("  %lld of %lld requests replayed%s, %lld bad lines; server %s\n",
                       static_cast<long long>(result.requests_done),
                       static_cast<long long>(info.trace_requests),
                       result.interrupted ? " (INTERRUPTED)" : "",
                       static_cast<long long>(info.bad_lines), info.server.c_str());
  out += printf_string(
      "  %zu FIFO prefill replicas at %s tokens/s, LRU %zu KV blocks x %d tokens; window %llds\n",
      options.replicas, rates_text(options).c_str(), options.capacity_blocks, kMooncakeBlockTokens,
      static_cast<long long>(options.window_ms / 1000));
  out += "  " + clock_text(result, options) + "\n";
  out += printf_string("  gateway %s, follows %.0f%% of hints; ReplicaStats %s\n\n",
                       std::string(gateway_name(options.gateway)).c_str(),
                       100.0 * options.follow_fraction, stats_text(options).c_str());
  out += printf_string("%-15s %9s %9s %9s %9s %9s %9s %9s %9s %9s %6s\n", "policy", "mean TTFT",
                       "p50 TTFT", "p90 TTFT", "p99 TTFT", "hit ratio", "req max/", "work max/",
                       "lookup", "lookup", "errors");
  out += printf_string("%-15s %9s %9s %9s %9s %9s %9s %9s %9s %9s %6s\n", "", "s", "s", "s", "s",
                       "", "mean", "mean", "p50 us", "p99 us", "");
  for (const auto& p : result.policies) {
    auto ttft = p.account.ttft_us();
    const auto t = summarize(ttft);
    auto samples = p.lookup_us;
    const auto latency = summarize(samples);
    std::int64_t errors = 0;
    for (const auto& [status, count] : p.errors) errors += count;
    out += printf_string(
        "%-15s %9.2f %9.2f %9.2f %9.2f %8.2f%% %9.2f %9.2f %9llu %9llu %6lld\n",
        std::string(policy_name(p.policy)).c_str(), seconds(t.mean_us), seconds(t.p50_us),
        seconds(t.p90_us), seconds(t.p99_us), 100.0 * p.account.hit_ratio(),
        p.account.balance().overall, p.account.work_max_over_mean(),
        static_cast<unsigned long long>(latency.p50_us),
        static_cast<unsigned long long>(latency.p99_us), static_cast<long long>(errors));
  }
  const auto& bound = result.bound.account();
  out += printf_string("%-15s %49.2f%%   (one never-evicting cache, all requests)\n", "upper bound",
                       100.0 * bound.hit_ratio());
  out += "\n";
  for (const auto& p : result.policies) {
    out += printf_string(
        "%s: %lld of %lld hit tokens, %lld requests finished, evictions %lld",
        std::string(policy_name(p.policy)).c_str(), static_cast<long long>(p.account.hit_tokens()),
        static_cast<long long>(p.account.prompt_tokens()),
        static_cast<long long>(p.account.requests()), static_cast<long long>(p.evictions));
    if (talks_to_server(p.policy)) {
      out += printf_string(
          "; tenant %s; hints followed %lld, not followed (--follow-fraction) %lld, overridden "
          "(saturated) %lld\n  reasons:",
          p.scope.tenant_id.c_str(), static_cast<long long>(p.followed_hints),
          static_cast<long long>(p.ignored_hints), static_cast<long long>(p.saturated_overrides));
      for (const auto& [reason, count] : p.reasons) {
        out += printf_string(" %s=%lld", reason.c_str(), static_cast<long long>(count));
      }
      for (const auto& [status, count] : p.errors) {
        out += printf_string(" error:%s=%lld", status.c_str(), static_cast<long long>(count));
      }
    }
    out += "\n";
  }
  if (!result.fatal_error.empty()) out += "error: " + result.fatal_error + "\n";
  return out;
}

nlohmann::json render_json(const ReplayResult& result, const ReplayOptions& options,
                           const RunInfo& info) {
  nlohmann::json doc;
  doc["schema"] = "inferencecache-replay/v2";
  doc["trace"] = {
      {"path", info.trace_path}, {"requests", info.trace_requests}, {"bad_lines", info.bad_lines}};
  doc["server"] = info.server;
  doc["requests_replayed"] = result.requests_done;
  doc["interrupted"] = result.interrupted;
  doc["error"] = result.fatal_error;
  auto lag = result.lag_us;
  doc["clock"] = {{"wall_clock", result.paced},
                  {"speed", options.speed},
                  {"wall_s", result.wall_s},
                  {"lag", summarize(lag)}};
  doc["config"] = {{"replicas", options.replicas},
                   {"capacity_blocks", options.capacity_blocks},
                   {"block_tokens", kMooncakeBlockTokens},
                   {"prefill_tokens_per_s", options.prefill_rates},
                   {"window_ms", options.window_ms},
                   {"stats_interval_ms", options.stats_interval_ms},
                   {"slots", options.slots},
                   {"gateway", gateway_name(options.gateway)},
                   {"follow_fraction", options.follow_fraction},
                   {"report_pressure", options.report_pressure},
                   {"model_id", options.model_id},
                   {"hash_scheme", options.hash_scheme}};
  const auto& bound = result.bound.account();
  doc["upper_bound"] = {{"hit_tokens", bound.hit_tokens()},
                        {"prompt_tokens", bound.prompt_tokens()},
                        {"hit_ratio", bound.hit_ratio()},
                        {"window_hit_ratio", window_ratios(bound)}};
  doc["policies"] = nlohmann::json::array();
  auto nullable = [](const std::vector<double>& values) {
    nlohmann::json out = nlohmann::json::array();
    for (double v : values) out.push_back(std::isnan(v) ? nlohmann::json() : nlohmann::json(v));
    return out;
  };
  for (const auto& p : result.policies) {
    auto samples = p.lookup_us;
    auto ttft = p.account.ttft_us();
    const auto balance = p.account.balance();
    nlohmann::json windows = nlohmann::json::array();
    for (const auto& w : p.account.windows()) {
      windows.push_back({{"hit_tokens", w.hit_tokens},
                         {"prompt_tokens", w.prompt_tokens},
                         {"requests_per_replica", w.requests},
                         {"ttft_ms_sum", w.ttft_ms_sum},
                         {"max_over_mean", max_over_mean(w.requests)}});
    }
    doc["policies"].push_back({{"policy", policy_name(p.policy)},
                               {"tenant_id", p.scope.tenant_id},
                               {"requests", p.account.requests()},
                               {"ttft", summarize(ttft)},
                               {"hit_tokens", p.account.hit_tokens()},
                               {"prompt_tokens", p.account.prompt_tokens()},
                               {"hit_ratio", p.account.hit_ratio()},
                               {"requests_per_replica", p.account.requests_per_replica()},
                               {"prefill_work_ms_per_replica", p.account.work_ms_per_replica()},
                               {"balance",
                                {{"max_over_mean", balance.overall},
                                 {"work_max_over_mean", p.account.work_max_over_mean()},
                                 {"window_mean_max_over_mean", balance.window_mean},
                                 {"window_worst_max_over_mean", balance.window_worst}}},
                               {"lookup_latency", summarize(samples)},
                               {"reasons", p.reasons},
                               {"errors", p.errors},
                               {"hints_followed", p.followed_hints},
                               {"hints_not_followed", p.ignored_hints},
                               {"saturated_overrides", p.saturated_overrides},
                               {"evictions", p.evictions},
                               {"window_hit_ratio", nullable(window_ratios(p.account))},
                               {"window_mean_ttft_s", nullable(window_ttft_s(p.account))},
                               {"windows", windows}});
  }
  return doc;
}

std::string render_svg(const ReplayResult& result, const ReplayOptions& options) {
  std::vector<Series> hits, ttft;
  for (const auto& p : result.policies) {
    auto samples = p.account.ttft_us();
    const auto t = summarize(samples);
    hits.push_back({printf_string("%s (%.1f%%)", std::string(policy_name(p.policy)).c_str(),
                                  100.0 * p.account.hit_ratio()),
                    window_ratios(p.account), false});
    ttft.push_back(
        {printf_string("%s (%.2f s, p90 %.2f s)", std::string(policy_name(p.policy)).c_str(),
                       seconds(t.mean_us), seconds(t.p90_us)),
         window_ttft_s(p.account), false});
  }
  hits.push_back({printf_string("upper bound (%.1f%%)", 100.0 * result.bound.account().hit_ratio()),
                  window_ratios(result.bound.account()), true});
  const std::string title = printf_string(
      "Prefix-hit ratio per %llds window: %zu replicas x %zu blocks, prefill %s tokens/s",
      static_cast<long long>(options.window_ms / 1000), options.replicas, options.capacity_blocks,
      rates_text(options).c_str());
  std::vector<LoadBars> loads;
  for (const auto& p : result.policies) {
    const auto& requests = p.account.requests_per_replica();
    const double mean = static_cast<double>(p.account.requests()) /
                        static_cast<double>(std::max<std::size_t>(requests.size(), 1));
    LoadBars bars{std::string(policy_name(p.policy)), {}};
    for (auto n : requests)
      bars.per_replica.push_back(mean > 0 ? static_cast<double>(n) / mean : 0);
    loads.push_back(std::move(bars));
  }
  return render_replay_svg(title, hits, ttft, static_cast<double>(options.window_ms) / 60'000.0,
                           loads);
}

}  // namespace ic::tools::replay
