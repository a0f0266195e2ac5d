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
// - CoreFamily: what a CounterFamily cannot express (label values that
//   appear at run time, a histogram, a merge other than a sum): one value of
//   the subsystem's own type per core, written by the owning core, copied on
//   scrape, merged and rendered by the type itself; rendered after the
//   registry's own family it names (RenderAfter), in registration order.
// All are registered before the runtime starts (not thread-safe).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
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

// The registry's own family after which a CoreFamily renders (so that a
// family keeps its place in the exposition when its owner registers it).
enum class RenderAfter : std::uint8_t {
  kTenantEvictions,     // inferencecache_tenant_evictions_total
  kIndexEvictions,      // inferencecache_index_evictions_total
  kPromptTextFailures,  // inferencecache_prompt_text_failures_total
};

// One core's value of a CoreFamily, type-erased so metrics/ stores, copies,
// merges and renders it without knowing the subsystem's type.
class CoreFamilyState {
 public:
  explicit CoreFamilyState(const void* type) : type_(type) {}
  virtual ~CoreFamilyState() = default;
  // Identifies the subsystem's type (CoreFamilyOf<T>::kType), so a stale id
  // of another Registry is caught instead of misread.
  const void* type() const { return type_; }
  // A copy for a scrape (made on the owning core).
  virtual std::unique_ptr<CoreFamilyState> copy() const = 0;
  // Adds `other` (a value of the same family, another core's) into this one.
  virtual void merge(const CoreFamilyState& other) = 0;
  // Writes the family's headers and samples (w.family, w.sample).
  virtual void render(Writer& w) const = 0;
  // On the owning core at each scrape, before its collectors run.
  virtual void begin_collect() = 0;

 private:
  const void* type_;
};

// The CoreFamilyState of a subsystem's type T, which provides
//   void merge(const T& other);     // another core's copy into this one
//   void render(Writer& w) const;   // headers and samples
// and optionally void begin_collect() (e.g. drop rows collectors rebuild).
template <typename T>
class CoreFamilyOf final : public CoreFamilyState {
 public:
  static constexpr char kType = 0;  // its address names T
  CoreFamilyOf() : CoreFamilyState(&kType) {}

  T value{};

  std::unique_ptr<CoreFamilyState> copy() const override {
    return std::make_unique<CoreFamilyOf>(*this);
  }
  void merge(const CoreFamilyState& other) override {
    value.merge(static_cast<const CoreFamilyOf&>(other).value);
  }
  void render(Writer& w) const override { value.render(w); }
  void begin_collect() override {
    if constexpr (requires(T & t) { t.begin_collect(); }) value.begin_collect();
  }
};

// A registered CoreFamily: where it renders and how to make a zeroed value.
struct CoreFamily {
  RenderAfter after;
  std::function<std::unique_ptr<CoreFamilyState>()> make;
};

// Where a CoreFamily of type T sits in every core's block; a
// default-constructed one (never registered) counts nothing.
template <typename T>
struct CoreFamilyId {
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  std::uint32_t index = kNone;
};

// A CoreFamilyState that copies deeply, so a Sample holding them stays a
// plain value (copied and moved across cores by the scrape).
class CoreFamilyCopy {
 public:
  CoreFamilyCopy() = default;
  explicit CoreFamilyCopy(std::unique_ptr<CoreFamilyState> state) : state_(std::move(state)) {}
  CoreFamilyCopy(const CoreFamilyCopy& other)
      : state_(other.state_ ? other.state_->copy() : nullptr) {}
  CoreFamilyCopy& operator=(const CoreFamilyCopy& other) {
    if (this != &other) state_ = other.state_ ? other.state_->copy() : nullptr;
    return *this;
  }
  CoreFamilyCopy(CoreFamilyCopy&&) noexcept = default;
  CoreFamilyCopy& operator=(CoreFamilyCopy&&) noexcept = default;

  const CoreFamilyState* get() const { return state_.get(); }
  CoreFamilyState* get() { return state_.get(); }

 private:
  std::unique_ptr<CoreFamilyState> state_;
};

// Everything registered, in registration order; what the renderer reads.
struct Registrations {
  std::vector<Group> groups;
  std::vector<CounterFamily> counter_families;
  std::vector<CoreFamily> core_families;
};

}  // namespace ic::metrics
