// Engine /metrics fixtures → the ReplicaStats numbers of docs/kvevents.md "Stats".
#include "kvevents/engine_stats.hh"

#include <doctest/doctest.h>

#include <cmath>

#include "fixtures.hh"

namespace ic::tools::kvevents {
namespace {

std::vector<Sample> scrape(const std::string& name) {
  return parse_exposition(test::read_data("engine-metrics/" + name + ".txt"));
}

EngineStats first(const std::string& name, StatsOptions options = {}) {
  StatsComputer c(std::move(options));
  const auto s = c.compute(scrape(name));
  REQUIRE(s.has_value());
  return *s;
}

}  // namespace

TEST_CASE("parse_exposition: labels, escapes, NaN, exemplars, comments") {
  const auto s = parse_exposition(
      "# HELP x y\n"
      "a 1\n"
      "b{k=\"v\",q=\"a\\\"b\"} 2.5 1700000000\n"
      "c{k=\"v\"} NaN\n"
      "d_total 3 # {trace_id=\"x\"} 1.0\n"
      "broken{k=v} 1\n"
      "# EOF\n");
  REQUIRE(s.size() == 4);
  CHECK(s[0].name == "a");
  CHECK(s[0].value == 1);
  CHECK(s[1].labels == std::vector<std::pair<std::string, std::string>>{{"k", "v"}, {"q", "a\"b"}});
  CHECK(s[1].value == 2.5);
  CHECK(std::isnan(s[2].value));
  CHECK(s[3].name == "d_total");
  CHECK(s[3].value == 3);
}

TEST_CASE("vllm_metrics_cpu then cpu_tick2: hit_rate 0 on the first scrape, 70/100 on the second") {
  StatsOptions o;
  o.engine_cache_size_bytes = 1000;
  StatsComputer c(o);
  const auto a = c.compute(scrape("vllm_metrics_cpu"));
  REQUIRE(a.has_value());
  CHECK(a->usage == doctest::Approx(0.42));
  CHECK(a->cache_memory_bytes == 420);
  CHECK(a->hit_rate == 0);
  CHECK(a->pressure == doctest::Approx(8.0 / 256));
  const auto b = c.compute(scrape("vllm_metrics_cpu_tick2"));
  REQUIRE(b.has_value());
  CHECK(b->usage == doctest::Approx(0.55));
  CHECK(b->hit_rate == doctest::Approx(0.7));
  CHECK(b->pressure == doctest::Approx(8.0 / 256));
  // Counters went backwards (engine restart): Δ ≤ 0 → 0.
  const auto again = c.compute(scrape("vllm_metrics_cpu"));
  REQUIRE(again.has_value());
  CHECK(again->hit_rate == 0);
}

TEST_CASE("OpenMetrics counters without _total: hit_rate 60/100") {
  StatsComputer c(StatsOptions{});
  REQUIRE(c.compute(scrape("vllm_metrics_openmetrics")).has_value());
  const auto b = c.compute(scrape("vllm_metrics_openmetrics_tick2"));
  REQUIRE(b.has_value());
  CHECK(b->hit_rate == doctest::Approx(0.6));
  CHECK(b->usage == doctest::Approx(0.30));
  CHECK(b->pressure == doctest::Approx(2.0 / 256));
}

TEST_CASE(
    "gpu and legacy cpu gauges: auto takes kv_cache_usage_perc, else the max of gpu and cpu") {
  CHECK(first("vllm_metrics_gpu").usage == doctest::Approx(0.61));
  CHECK(first("vllm_metrics_gpu").pressure == doctest::Approx(12.0 / 256));
  CHECK(first("vllm_metrics_legacy_cpu").usage == doctest::Approx(0.42));
  StatsOptions gpu;
  gpu.cache_tier = CacheTierChoice::gpu;
  CHECK(first("vllm_metrics_legacy_cpu", gpu).usage == 0);
  StatsOptions kv;
  kv.cache_tier = CacheTierChoice::kv;
  CHECK(first("vllm_metrics_legacy_cpu", kv).usage == 0);
  StatsOptions cpu;
  cpu.cache_tier = CacheTierChoice::cpu;
  CHECK(first("vllm_metrics_legacy_cpu", cpu).usage == doctest::Approx(0.42));
}

TEST_CASE(
    "multi-model scrape: sums and maxes across series, or one model with --engine-model-name") {
  const auto all = first("vllm_metrics_multimodel");
  CHECK(all.usage == doctest::Approx(0.95));
  CHECK(all.pressure == doctest::Approx(82.0 / 256));
  StatsOptions primary;
  primary.engine_model_name = "primary";
  primary.max_concurrency_ceiling = 4;
  const auto p = first("vllm_metrics_multimodel", primary);
  CHECK(p.usage == doctest::Approx(0.20));
  CHECK(p.pressure == doctest::Approx(0.5));
  StatsOptions tight;
  tight.max_concurrency_ceiling = 10;
  CHECK(first("vllm_metrics_multimodel", tight).pressure == 1.0);  // clamped
}

TEST_CASE("partial scrape: load gauges only → zeros elsewhere; t2 counters are cumulative") {
  const auto p = first("vllm_metrics_partial");
  CHECK(p.usage == 0);
  CHECK(p.hit_rate == 0);
  CHECK(p.pressure == 0);
  const auto t2 = first("vllm_metrics_t2");
  CHECK(t2.t2_hit_tokens == 750);
  CHECK(t2.t2_query_tokens == 1000);
  CHECK(t2.hit_rate == 0);
}

TEST_CASE("prefix_cache_{hit,query}_tokens: the engine's cumulative counters as scraped") {
  // _total names (vLLM v1) and the OpenMetrics names without the suffix.
  const auto gpu = first("vllm_metrics_gpu");
  CHECK(gpu.prefix_cache_hit_tokens == 800);
  CHECK(gpu.prefix_cache_query_tokens == 1000);
  StatsComputer c(StatsOptions{});
  const auto a = c.compute(scrape("vllm_metrics_openmetrics"));
  REQUIRE(a.has_value());
  CHECK(a->prefix_cache_hit_tokens == 10);
  CHECK(a->prefix_cache_query_tokens == 20);
  const auto b = c.compute(scrape("vllm_metrics_openmetrics_tick2"));
  REQUIRE(b.has_value());
  CHECK(b->prefix_cache_hit_tokens == 70);  // cumulative, not the Δ of hit_rate
  CHECK(b->prefix_cache_query_tokens == 120);
  // Summed across models, or the one --engine-model-name selects.
  const auto all = first("vllm_metrics_multimodel");
  CHECK(all.prefix_cache_hit_tokens == 1009);
  CHECK(all.prefix_cache_query_tokens == 1040);
  StatsOptions primary;
  primary.engine_model_name = "primary";
  const auto p = first("vllm_metrics_multimodel", primary);
  CHECK(p.prefix_cache_hit_tokens == 10);
  CHECK(p.prefix_cache_query_tokens == 40);
  // Without the families, and for SGLang: 0.
  CHECK(first("vllm_metrics_partial").prefix_cache_hit_tokens == 0);
  CHECK(first("vllm_metrics_partial").prefix_cache_query_tokens == 0);
  CHECK(first("sglang_metrics").prefix_cache_hit_tokens == 0);
  CHECK(first("sglang_metrics").prefix_cache_query_tokens == 0);
}

TEST_CASE("SGLang: usage token_usage, hit_rate read directly, pressure (3 + 5) / 256, no t2") {
  StatsOptions o;
  o.engine_cache_size_bytes = 1'000'000;
  const auto s = first("sglang_metrics", o);
  CHECK(s.usage == doctest::Approx(0.63));
  CHECK(s.cache_memory_bytes == 630000);
  CHECK(s.hit_rate == doctest::Approx(0.75));
  CHECK(s.pressure == doctest::Approx(8.0 / 256));
  CHECK(s.t2_hit_tokens == 0);
  CHECK(s.t2_query_tokens == 0);
  // Per-priority series are a breakdown of the total: skipped.
  StatsComputer c(StatsOptions{});
  const auto pr = c.compute(parse_exposition(
      "sglang:num_running_reqs{priority=\"\"} 4\nsglang:num_running_reqs{priority=\"1\"} 4\n"
      "sglang:num_queue_reqs 0\n"));
  REQUIRE(pr.has_value());
  CHECK(pr->pressure == doctest::Approx(4.0 / 256));
}

TEST_CASE("no known family, or a missing load gauge: nothing is sent") {
  StatsComputer c(StatsOptions{});
  CHECK_FALSE(c.compute(parse_exposition("process_cpu_seconds_total 1\n")).has_value());
  CHECK_FALSE(c.compute(parse_exposition("vllm:num_requests_running 1\n")).has_value());
  CHECK_FALSE(c.compute({}).has_value());
}

TEST_CASE("data parallel: each rank's stats come from its own engine / dp_rank series") {
  // vLLM labels each DP engine's series engine="<rank>"; SGLang uses dp_rank="<rank>".
  const std::string vllm =
      "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.25\n"
      "vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"} 0.75\n"
      "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 2\n"
      "vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 10\n"
      "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 0\n"
      "vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 6\n";
  StatsOptions o;
  o.engine_cache_size_bytes = 1000;
  std::vector<EngineStats> ranks;
  for (std::int64_t r : {0, 1}) {
    o.dp_rank = r;
    StatsComputer c(o);
    const auto s = c.compute(parse_exposition(vllm));
    REQUIRE(s.has_value());
    ranks.push_back(*s);
  }
  CHECK(ranks[0].cache_memory_bytes == 250);
  CHECK(ranks[0].pressure == doctest::Approx(2.0 / 256));
  CHECK(ranks[1].cache_memory_bytes == 750);
  CHECK(ranks[1].pressure == doctest::Approx(16.0 / 256));
  o.dp_rank.reset();  // no DP: every series (usage max, load summed)
  const auto all = StatsComputer(o).compute(parse_exposition(vllm));
  REQUIRE(all.has_value());
  CHECK(all->cache_memory_bytes == 750);
  CHECK(all->pressure == doctest::Approx(18.0 / 256));
  o.dp_rank = 1;
  const auto sglang = StatsComputer(o).compute(
      parse_exposition("sglang:token_usage{dp_rank=\"0\"} 0.5\nsglang:token_usage{dp_rank=\"1\"} "
                       "0.125\nsglang:num_running_reqs{dp_rank=\"0\"} 9\n"
                       "sglang:num_running_reqs{dp_rank=\"1\"} 3\nsglang:num_queue_reqs 1\n"));
  REQUIRE(sglang.has_value());
  CHECK(sglang->cache_memory_bytes == 125);
  CHECK(sglang->pressure == doctest::Approx(4.0 / 256));  // 3 running + 1 unlabelled waiting
}

}  // namespace ic::tools::kvevents
