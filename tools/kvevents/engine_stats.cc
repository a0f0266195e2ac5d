#include "kvevents/engine_stats.hh"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <initializer_list>

#include "metrics/label_value.hh"

namespace ic::tools::kvevents {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// Parses `{k="v",…}` starting at s[0] == '{'; returns the rest after '}' or nullopt.
std::optional<std::string_view> parse_labels(std::string_view s, Sample& out) {
  std::size_t i = 1;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == ',')) ++i;
    if (i < s.size() && s[i] == '}') return s.substr(i + 1);
    const std::size_t eq = s.find('=', i);
    if (eq == std::string_view::npos || eq + 1 >= s.size() || s[eq + 1] != '"') return std::nullopt;
    std::string key(trim(s.substr(i, eq - i)));
    std::string value;
    const std::size_t close = metrics::read_label_value(s, eq + 2, value);
    if (close == std::string_view::npos) return std::nullopt;
    out.labels.emplace_back(std::move(key), std::move(value));
    i = close + 1;
  }
  return std::nullopt;
}

std::optional<double> parse_value(std::string_view s) {
  s = trim(s);
  const std::size_t end = s.find_first_of(" \t");
  std::string token(s.substr(0, end));
  if (token.empty()) return std::nullopt;
  char* stop = nullptr;
  const double v = std::strtod(token.c_str(), &stop);  // accepts NaN, +Inf, -Inf
  if (stop != token.c_str() + token.size()) return std::nullopt;
  return v;
}

double clamp01(double v) {
  if (!std::isfinite(v)) return 0;
  return std::clamp(v, 0.0, 1.0);
}

}  // namespace

std::vector<Sample> parse_exposition(std::string_view text) {
  std::vector<Sample> out;
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty() || line.front() == '#') continue;
    // OpenMetrics exemplars follow " # ".
    if (const std::size_t ex = line.find(" # "); ex != std::string_view::npos)
      line = line.substr(0, ex);
    Sample sample;
    const std::size_t name_end = line.find_first_of("{ \t");
    if (name_end == std::string_view::npos || name_end == 0) continue;
    sample.name = std::string(line.substr(0, name_end));
    std::string_view rest = line.substr(name_end);
    if (rest.front() == '{') {
      const auto after = parse_labels(rest, sample);
      if (!after) continue;
      rest = *after;
    }
    const auto value = parse_value(rest);
    if (!value) continue;
    sample.value = *value;
    out.push_back(std::move(sample));
  }
  return out;
}

bool StatsComputer::selected(const Sample& s) const {
  for (const auto& [k, v] : s.labels) {
    if (k == "model_name" && !options_.engine_model_name.empty() &&
        v != options_.engine_model_name) {
      return false;
    }
    // SGLang's per-priority breakdown would double-count the total series.
    if (k == "priority" && !v.empty()) return false;
    // Each DP rank is its own replica: its load and cache are its own series.
    if (options_.dp_rank && (k == "engine" || k == "dp_rank") &&
        v != std::to_string(*options_.dp_rank)) {
      return false;
    }
  }
  return true;
}

namespace {

// Sum (or max) over the selected series of the first family name present.
struct Family {
  bool present = false;
  double sum = 0;
  double max = 0;
};

// The first of `names` with a series `keep` selects, summed and maxed over them.
template <typename Keep>
Family find_family(const std::vector<Sample>& samples,
                   std::initializer_list<std::string_view> names, Keep keep) {
  for (std::string_view name : names) {
    Family f;
    for (const Sample& s : samples) {
      if (s.name != name || !keep(s)) continue;
      f.max = f.present ? std::max(f.max, s.value) : s.value;
      f.sum += s.value;
      f.present = true;
    }
    if (f.present) return f;
  }
  return Family{};
}

}  // namespace

std::optional<EngineStats> StatsComputer::compute(const std::vector<Sample>& samples) {
  if (auto s = vllm(samples)) return s;
  return sglang(samples);
}

std::optional<EngineStats> StatsComputer::vllm(const std::vector<Sample>& samples) {
  auto family = [&](std::initializer_list<std::string_view> names) {
    return find_family(samples, names, [this](const Sample& s) { return selected(s); });
  };
  const Family running = family({"vllm:num_requests_running"});
  const Family waiting = family({"vllm:num_requests_waiting"});
  if (!running.present || !waiting.present) return std::nullopt;
  EngineStats out;
  const Family kv = family({"vllm:kv_cache_usage_perc"});
  const Family gpu = family({"vllm:gpu_cache_usage_perc"});
  const Family cpu = family({"vllm:cpu_cache_usage_perc"});
  switch (options_.cache_tier) {
    case CacheTierChoice::kv:
      out.usage = kv.max;
      break;
    case CacheTierChoice::gpu:
      out.usage = gpu.max;
      break;
    case CacheTierChoice::cpu:
      out.usage = cpu.max;
      break;
    case CacheTierChoice::automatic:
      out.usage = kv.present ? kv.max : std::max(gpu.max, cpu.max);
      break;
  }
  out.usage = clamp01(out.usage);
  const Family hits = family({"vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits"});
  const Family queries = family({"vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries"});
  if (hits.present && queries.present) {
    out.prefix_cache_hit_tokens = std::llround(hits.sum);
    out.prefix_cache_query_tokens = std::llround(queries.sum);
    if (last_hits_ && last_queries_) {
      const double dq = queries.sum - *last_queries_;
      const double dh = hits.sum - *last_hits_;
      out.hit_rate = dq > 0 && dh > 0 ? clamp01(dh / dq) : 0;
    }
    last_hits_ = hits.sum;
    last_queries_ = queries.sum;
  }
  out.pressure = clamp01((running.sum + waiting.sum) / static_cast<double>(std::max<std::int64_t>(
                                                           1, options_.max_concurrency_ceiling)));
  const Family t2h =
      family({"vllm:external_prefix_cache_hits_total", "vllm:external_prefix_cache_hits"});
  const Family t2q =
      family({"vllm:external_prefix_cache_queries_total", "vllm:external_prefix_cache_queries"});
  out.t2_hit_tokens = static_cast<std::int64_t>(t2h.sum);
  out.t2_query_tokens = static_cast<std::int64_t>(t2q.sum);
  out.cache_memory_bytes =
      std::llround(out.usage * static_cast<double>(options_.engine_cache_size_bytes));
  return out;
}

std::optional<EngineStats> StatsComputer::sglang(const std::vector<Sample>& samples) {
  auto family = [&](std::string_view name) {
    return find_family(samples, {name}, [this](const Sample& s) { return selected(s); });
  };
  const Family running = family("sglang:num_running_reqs");
  const Family waiting = family("sglang:num_queue_reqs");
  if (!running.present || !waiting.present) return std::nullopt;
  EngineStats out;
  out.usage = clamp01(family("sglang:token_usage").max);
  out.hit_rate = clamp01(family("sglang:cache_hit_rate").max);
  out.pressure = clamp01((running.sum + waiting.sum) / static_cast<double>(std::max<std::int64_t>(
                                                           1, options_.max_concurrency_ceiling)));
  out.cache_memory_bytes =
      std::llround(out.usage * static_cast<double>(options_.engine_cache_size_bytes));
  return out;
}

}  // namespace ic::tools::kvevents
