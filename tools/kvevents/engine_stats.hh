// Engine /metrics scrape → ReplicaStats (docs/kvevents.md "Stats"): a Prometheus text /
// OpenMetrics parser and the vLLM / SGLang formulas for usage, hit_rate, pressure and the
// tier-2 token counters.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ic::tools::kvevents {

// One sample line: `name{k="v",…} value [timestamp]`.
struct Sample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;
};

// Every well-formed sample of a Prometheus text (0.0.4) or OpenMetrics exposition; comments,
// `# EOF`, exemplars and malformed lines are skipped.
std::vector<Sample> parse_exposition(std::string_view text);

// Which usage gauge feeds cache_memory_bytes (--cache-tier).
enum class CacheTierChoice { automatic, kv, gpu, cpu };

struct StatsOptions {
  CacheTierChoice cache_tier = CacheTierChoice::automatic;
  std::string engine_model_name;               // only series with this model_name label, if set
  std::int64_t max_concurrency_ceiling = 256;  // pressure denominator
  std::int64_t engine_cache_size_bytes = 0;    // cache_memory_bytes = usage × this
  // Only the series of this data-parallel rank (vLLM's `engine` label, SGLang's `dp_rank`);
  // series without such a label count for every rank. nullopt: every series (no DP).
  std::optional<std::int64_t> dp_rank;
};

// The ReplicaStats fields one scrape gives.
struct EngineStats {
  double usage = 0;  // KV cache usage ratio, 0..1
  std::int64_t cache_memory_bytes = 0;
  double hit_rate = 0;             // 0..1
  double pressure = 0;             // 0..1
  std::int64_t t2_hit_tokens = 0;  // cumulative (vLLM external prefix cache)
  std::int64_t t2_query_tokens = 0;
  // The engine's own prefix cache, cumulative tokens as scraped (vLLM's
  // prefix_cache_hits / prefix_cache_queries, summed over the selected series;
  // 0 without them and for SGLang).
  std::int64_t prefix_cache_hit_tokens = 0;
  std::int64_t prefix_cache_query_tokens = 0;
};

// Keeps the previous scrape's counters: vLLM's hit_rate is Δhits / Δqueries between scrapes.
class StatsComputer {
 public:
  explicit StatsComputer(StatsOptions options) : options_(std::move(options)) {}

  // Stats from one scrape; nullopt when it has no known family or lacks the running/waiting
  // gauges (nothing is sent that tick).
  std::optional<EngineStats> compute(const std::vector<Sample>& samples);

 private:
  std::optional<EngineStats> vllm(const std::vector<Sample>& samples);
  std::optional<EngineStats> sglang(const std::vector<Sample>& samples);
  bool selected(const Sample& s) const;

  StatsOptions options_;
  std::optional<double> last_hits_;
  std::optional<double> last_queries_;
};

}  // namespace ic::tools::kvevents
