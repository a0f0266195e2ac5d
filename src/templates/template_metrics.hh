#pragma once
// inferencecache_template_cache_busts_total{template} (docs/templates.md
// "Cache-bust diagnosis"): RenderTemplate calls whose volatile part began
// before a large stable section, per core by "<tenant_id>/<template name>".
// The templates room owns the family and registers it with the metrics
// Registry (metrics/group.hh CoreFamily: its label values appear at run time).

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "metrics/exposition.hh"
#include "metrics/registry.hh"

namespace ic::templates {

// One core's cache busts by template key; at most metrics::kMaxDynamicSeries
// keys, further ones fold into metrics::kOverflowLabel (a tenant inventing
// template names cannot grow memory without bound).
struct CacheBusts {
  std::map<std::string, std::uint64_t, std::less<>> by_template;

  // One bust of `template_key` ("<tenant_id>/<template name>").
  void add(std::string_view template_key);
  // Sums another core's counts into these.
  void merge(const CacheBusts& other);
  // The family's header and one sample per key, keys in byte order.
  void render(metrics::Writer& w) const;
};

// Registers the family with `registry`; once, before the runtime starts.
void register_template_metrics(metrics::Registry& registry);

// Counts one bust of `template_key` on the calling core (metrics::local());
// nothing before register_template_metrics ran.
void count_cache_bust(std::string_view template_key);

}  // namespace ic::templates
