#pragma once
// Where the template sets live in a running server: one slot per core, read
// by that core's RenderTemplate calls without any lock, and the latest set
// installed, for the control listener's GET and the state file (any thread).
// A change installs the same immutable TemplateSet in every slot
// (server/templates.cc broadcasts it, as policies are).

#include <memory>
#include <mutex>
#include <vector>

#include "templates/template_set.hh"

namespace ic::templates {

class Catalog {
 public:
  // `cores` slots, each holding the empty set.
  explicit Catalog(unsigned cores);

  // ON `core`: the set its next render uses.
  const std::shared_ptr<const TemplateSet>& on_core(unsigned core) const {
    return slots_[core].set;
  }
  // ON `core`: installs `set` there.
  void install_on_core(unsigned core, std::shared_ptr<const TemplateSet> set) {
    slots_[core].set = std::move(set);
  }
  // Any thread: the latest set accepted (before its broadcast completes).
  std::shared_ptr<const TemplateSet> latest() const;
  void set_latest(std::shared_ptr<const TemplateSet> set);
  unsigned cores() const { return static_cast<unsigned>(slots_.size()); }

 private:
  // One cache line per core: each core writes only its own.
  struct alignas(64) Slot {
    std::shared_ptr<const TemplateSet> set = TemplateSet::empty();
  };
  std::vector<Slot> slots_;
  mutable std::mutex mutex_;
  std::shared_ptr<const TemplateSet> latest_ = TemplateSet::empty();
};

}  // namespace ic::templates
