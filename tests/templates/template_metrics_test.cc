// inferencecache_template_cache_busts_total{template} as the templates room
// registers it (templates/template_metrics.hh): summed over cores, folded into
// __overflow__ past metrics::kMaxDynamicSeries keys on one core.

#include <doctest/doctest.h>

#include <string>

#include "metrics/core_metrics.hh"
#include "metrics/prometheus.hh"
#include "metrics/registry.hh"
#include "metrics/scrape.hh"
#include "templates/template_metrics.hh"

namespace {

// The family's lines in a scrape of `registry`'s cores.
std::string scrape(ic::metrics::Registry& registry) {
  std::vector<std::optional<ic::metrics::Sample>> copies;
  for (unsigned core = 0; core < registry.cores(); ++core) {
    copies.emplace_back(registry.core(core).collect());
  }
  const std::string all = ic::metrics::render_prometheus(
      ic::metrics::merge_samples(copies), ic::metrics::ProcessFigures{}, registry.registrations());
  const std::size_t from = all.find("# HELP inferencecache_template_cache_busts_total");
  const std::size_t to = all.find("# HELP inferencecache_index_evictions_total");
  REQUIRE(from != std::string::npos);
  REQUIRE(to != std::string::npos);
  return all.substr(from, to - from);
}

}  // namespace

TEST_CASE("template cache busts are summed over cores, by template key") {
  ic::metrics::Registry registry(2);
  ic::templates::register_template_metrics(registry);
  registry.bind_current_thread(0);
  ic::templates::count_cache_bust("team-a/agent");
  ic::templates::count_cache_bust("team-b/chat");
  registry.bind_current_thread(1);
  ic::templates::count_cache_bust("team-a/agent");
  CHECK(scrape(registry) ==
        "# HELP inferencecache_template_cache_busts_total RenderTemplate calls whose volatile "
        "part began before a large stable section.\n"
        "# TYPE inferencecache_template_cache_busts_total counter\n"
        "inferencecache_template_cache_busts_total{template=\"team-a/agent\"} 2\n"
        "inferencecache_template_cache_busts_total{template=\"team-b/chat\"} 1\n");
}

TEST_CASE("template keys past the per-core limit fold into __overflow__") {
  ic::templates::CacheBusts busts;
  for (std::size_t i = 0; i < ic::metrics::kMaxDynamicSeries + 5; ++i) {
    busts.add("t/" + std::to_string(i));
  }
  CHECK(busts.by_template.size() == ic::metrics::kMaxDynamicSeries);
  // kMaxDynamicSeries - 1 keys of their own; the other 6 count in the overflow series.
  CHECK(busts.by_template.at(std::string(ic::metrics::kOverflowLabel)) == 6);
  busts.add("t/0");  // a key it already holds still counts on its own
  CHECK(busts.by_template.at("t/0") == 2);
}

TEST_CASE("an unregistered family counts nothing") {
  ic::metrics::Registry registry(1);
  registry.bind_current_thread(0);
  ic::templates::count_cache_bust("team-a/agent");  // no CoreFamily of this registry: ignored
  CHECK(registry.core(0).collect().families.empty());
}
