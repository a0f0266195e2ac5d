#pragma once
// Metric families a subsystem registers with the Registry, the way Seastar's
// metric groups do (seastar/core/metrics.hh, metric_groups::add_group): the
// subsystem names its families and says how to read them; metrics/ only
// stores, sums and renders, and knows none of the subsystems' types.
//
// Two kinds:
// - Group: process-wide figures (relaxed atomics the subsystem owns, e.g.
//   persist/stats.hh), read at scrape time by the functions given here;
//   rendered after the process families, groups in registration order.
// - CounterFamily: one counter per label value on every core, written by the
//   owning core's thread with a plain increment (CoreMetrics::add), summed
//   over the cores on scrape; rendered after the connection families, in
//   registration order.
// Both are registered before the runtime starts (not thread-safe).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/exposition.hh"

namespace ic::metrics {

// One family of a Group: its name (after kPrefix), Prometheus type
// ("counter" | "gauge"), help, and `samples`, which writes its sample lines
// with `w.sample(name, labels, value)` (none is allowed: the family then
// shows its header only).
struct Family {
  std::string_view name;
  std::string_view type;
  std::string_view help;
  std::function<void(Writer& w, std::string_view name)> samples;
};

// An unlabelled family with one sample, `read()` (any integer or floating
// point value; a bool should be given as 0/1).
template <typename Read>
Family single(std::string_view name, std::string_view type, std::string_view help, Read read) {
  return Family{name, type, help,
                [read](Writer& w, std::string_view n) { w.sample(n, {}, read()); }};
}

// A subsystem's process-wide families. `shown()` says whether the group
// renders at all in this scrape (e.g. only with --state-file); the strings
// must outlive the Registry (literals).
struct Group {
  std::string_view name;  // the subsystem, e.g. "persist"
  std::function<bool()> shown = [] { return true; };
  std::vector<Family> families;
};

// A per-core counter family with one label: one series per value of
// `label`, rendered in the order given, each as
// <prefix><name>{<label>="<value>"} <sum over cores>.
struct CounterFamily {
  std::string_view name;
  std::string_view help;
  std::string_view label;
  std::vector<std::string_view> values;
};

// Where a CounterFamily's counters sit in every core's block; a
// default-constructed one (never registered) counts nothing.
struct CounterFamilyId {
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  std::uint32_t first = kNone;  // index of the first value's counter
  std::uint32_t size = 0;       // number of label values
};

// Everything registered, in registration order; what the renderer reads.
struct Registrations {
  std::vector<Group> groups;
  std::vector<CounterFamily> counter_families;
};

}  // namespace ic::metrics
