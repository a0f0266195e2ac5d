#include "metrics/scrape.hh"

#include "metrics/prometheus.hh"
#include "runtime/map_reduce.hh"

namespace ic::metrics {

Sample merge_samples(const std::vector<std::optional<Sample>>& copies) {
  Sample merged;
  for (const auto& copy : copies) {
    if (copy) merged.merge(*copy);
  }
  return merged;
}

void scrape(runtime::Runtime& rt, Registry& registry,
            std::function<void(std::optional<std::string> body)> done) {
  runtime::map_reduce<Sample>(
      rt, [&registry](unsigned core) { return registry.core(core).collect(); },
      [&rt, &registry, done = std::move(done)](std::vector<std::optional<Sample>> copies) {
        for (const auto& copy : copies) {
          if (!copy) {
            done(std::nullopt);
            return;
          }
        }
        Sample merged = merge_samples(copies);
        registry.collect_global(merged);
        ProcessFigures process = registry.process_figures();
        process.reactor_backend = runtime::backend_name(rt.backend());
        done(render_prometheus(merged, process, registry.registrations()));
      });
}

}  // namespace ic::metrics
