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
  out += printf_string("  %zu replicas x %zu KV blocks (%zu tokens each), LRU; %s; window %llds\n",
                       options.replicas, options.capacity_blocks,
                       options.capacity_blocks * static_cast<std::size_t>(kMooncakeBlockTokens),
                       options.realtime ? printf_string("realtime x%.2f", options.speed).c_str()
                                        : "as fast as possible",
                       static_cast<long long>(options.window_ms / 1000));
  out += printf_string("  gateway %s; ReplicaStats every %llds of trace time, pressure %s\n\n",
                       std::string(gateway_name(options.gateway)).c_str(),
                       static_cast<long long>(options.stats_interval_ms / 1000),
                       options.report_pressure ? "in-flight/slots" : "0 (not reported)");
  out += printf_string("%-15s %9s %12s %12s %8s %15s %9s %9s %9s %8s\n", "policy", "hit ratio",
                       "hit tokens", "prompt tok", "max/mean", "window avg/max", "p50 us", "p99 us",
                       "p99.9 us", "errors");
  for (const auto& p : result.policies) {
    auto samples = p.lookup_us;
    const auto latency = summarize(samples);
    const auto balance = p.account.balance();
    std::int64_t errors = 0;
    for (const auto& [status, count] : p.errors) errors += count;
    out += printf_string(
        "%-15s %8.2f%% %12lld %12lld %8.2f %7.2f/%-7.2f %9llu %9llu %9llu %8lld\n",
        std::string(policy_name(p.policy)).c_str(), 100.0 * p.account.hit_ratio(),
        static_cast<long long>(p.account.hit_tokens()),
        static_cast<long long>(p.account.prompt_tokens()), balance.overall, balance.window_mean,
        balance.window_worst, static_cast<unsigned long long>(latency.p50_us),
        static_cast<unsigned long long>(latency.p99_us),
        static_cast<unsigned long long>(latency.p999_us), static_cast<long long>(errors));
  }
  const auto& bound = result.bound.account();
  out += printf_string("%-15s %8.2f%% %12lld %12lld   (one never-evicting cache, all requests)\n",
                       "upper bound", 100.0 * bound.hit_ratio(),
                       static_cast<long long>(bound.hit_tokens()),
                       static_cast<long long>(bound.prompt_tokens()));
  out += "\n";
  for (const auto& p : result.policies) {
    out +=
        printf_string("%s: tenant %s; evictions %lld", std::string(policy_name(p.policy)).c_str(),
                      p.scope.tenant_id.c_str(), static_cast<long long>(p.evictions));
    if (p.policy == Policy::kInferenceCache) {
      out += printf_string("; hints followed %lld, overridden (saturated) %lld",
                           static_cast<long long>(p.followed_hints),
                           static_cast<long long>(p.saturated_overrides));
    }
    out += "\n  reasons:";
    for (const auto& [reason, count] : p.reasons) {
      out += printf_string(" %s=%lld", reason.c_str(), static_cast<long long>(count));
    }
    for (const auto& [status, count] : p.errors) {
      out += printf_string(" error:%s=%lld", status.c_str(), static_cast<long long>(count));
    }
    out += "\n";
  }
  if (!result.fatal_error.empty()) out += "error: " + result.fatal_error + "\n";
  return out;
}

nlohmann::json render_json(const ReplayResult& result, const ReplayOptions& options,
                           const RunInfo& info) {
  nlohmann::json doc;
  doc["schema"] = "inferencecache-replay/v1";
  doc["trace"] = {
      {"path", info.trace_path}, {"requests", info.trace_requests}, {"bad_lines", info.bad_lines}};
  doc["server"] = info.server;
  doc["requests_replayed"] = result.requests_done;
  doc["interrupted"] = result.interrupted;
  doc["error"] = result.fatal_error;
  doc["config"] = {{"replicas", options.replicas},
                   {"capacity_blocks", options.capacity_blocks},
                   {"block_tokens", kMooncakeBlockTokens},
                   {"realtime", options.realtime},
                   {"speed", options.speed},
                   {"window_ms", options.window_ms},
                   {"stats_interval_ms", options.stats_interval_ms},
                   {"prefill_tokens_per_ms", options.engine.prefill_tokens_per_ms},
                   {"decode_ms_per_token", options.engine.decode_ms_per_token},
                   {"slots", options.engine.slots},
                   {"gateway", gateway_name(options.gateway)},
                   {"report_pressure", options.report_pressure},
                   {"model_id", options.model_id},
                   {"hash_scheme", options.hash_scheme}};
  const auto& bound = result.bound.account();
  doc["upper_bound"] = {{"hit_tokens", bound.hit_tokens()},
                        {"prompt_tokens", bound.prompt_tokens()},
                        {"hit_ratio", bound.hit_ratio()},
                        {"window_hit_ratio", window_ratios(bound)}};
  doc["policies"] = nlohmann::json::array();
  for (const auto& p : result.policies) {
    auto samples = p.lookup_us;
    const auto balance = p.account.balance();
    nlohmann::json windows = nlohmann::json::array();
    for (const auto& w : p.account.windows()) {
      windows.push_back({{"hit_tokens", w.hit_tokens},
                         {"prompt_tokens", w.prompt_tokens},
                         {"requests_per_replica", w.requests},
                         {"max_over_mean", max_over_mean(w.requests)}});
    }
    std::vector<double> ratios = window_ratios(p.account);
    nlohmann::json ratio_json = nlohmann::json::array();
    for (double v : ratios)
      ratio_json.push_back(std::isnan(v) ? nlohmann::json() : nlohmann::json(v));
    doc["policies"].push_back({{"policy", policy_name(p.policy)},
                               {"tenant_id", p.scope.tenant_id},
                               {"requests", p.account.requests()},
                               {"hit_tokens", p.account.hit_tokens()},
                               {"prompt_tokens", p.account.prompt_tokens()},
                               {"hit_ratio", p.account.hit_ratio()},
                               {"requests_per_replica", p.account.requests_per_replica()},
                               {"balance",
                                {{"max_over_mean", balance.overall},
                                 {"window_mean_max_over_mean", balance.window_mean},
                                 {"window_worst_max_over_mean", balance.window_worst}}},
                               {"lookup_latency", summarize(samples)},
                               {"reasons", p.reasons},
                               {"errors", p.errors},
                               {"hints_followed", p.followed_hints},
                               {"saturated_overrides", p.saturated_overrides},
                               {"evictions", p.evictions},
                               {"window_hit_ratio", ratio_json},
                               {"windows", windows}});
  }
  return doc;
}

std::string render_svg(const ReplayResult& result, const ReplayOptions& options) {
  std::vector<Series> series;
  for (const auto& p : result.policies) {
    series.push_back({printf_string("%s (%.1f%%)", std::string(policy_name(p.policy)).c_str(),
                                    100.0 * p.account.hit_ratio()),
                      window_ratios(p.account), false});
  }
  series.push_back(
      {printf_string("upper bound (%.1f%%)", 100.0 * result.bound.account().hit_ratio()),
       window_ratios(result.bound.account()), true});
  const std::string title = printf_string(
      "Prefix-hit ratio per %llds window: %zu replicas x %zu blocks (Mooncake conversation)",
      static_cast<long long>(options.window_ms / 1000), options.replicas, options.capacity_blocks);
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
  return render_replay_svg(title, series, static_cast<double>(options.window_ms) / 60'000.0, loads);
}

}  // namespace ic::tools::replay
