#include "templates/template_metrics.hh"

#include "metrics/core_metrics.hh"

namespace ic::templates {

namespace {
// Written once before the reactors start (their threads' start orders it
// before every read); default: unregistered, counts nothing.
metrics::CoreFamilyId<CacheBusts> g_cache_busts;
}  // namespace

void CacheBusts::add(std::string_view template_key) {
  if (auto it = by_template.find(template_key); it != by_template.end()) {
    ++it->second;
    return;
  }
  // Keep one slot free for the overflow series itself.
  const std::string_view key =
      by_template.size() + 1 >= metrics::kMaxDynamicSeries ? metrics::kOverflowLabel : template_key;
  ++by_template.try_emplace(std::string(key)).first->second;
}

void CacheBusts::merge(const CacheBusts& other) {
  for (const auto& [key, n] : other.by_template) by_template[key] += n;
}

void CacheBusts::render(metrics::Writer& w) const {
  w.family("template_cache_busts_total", "counter",
           "RenderTemplate calls whose volatile part began before a large stable section.");
  for (const auto& [key, n] : by_template) {
    w.sample("template_cache_busts_total", {{"template", key}}, n);
  }
}

void register_template_metrics(metrics::Registry& registry) {
  g_cache_busts = registry.add_core_family<CacheBusts>(metrics::RenderAfter::kTenantEvictions);
}

void count_cache_bust(std::string_view template_key) {
  if (CacheBusts* busts = metrics::local().family(g_cache_busts)) busts->add(template_key);
}

}  // namespace ic::templates
