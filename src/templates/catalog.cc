#include "templates/catalog.hh"

namespace ic::templates {

Catalog::Catalog(unsigned cores) : slots_(cores == 0 ? 1 : cores) {}

std::shared_ptr<const TemplateSet> Catalog::latest() const {
  std::lock_guard lock(mutex_);
  return latest_;
}

void Catalog::set_latest(std::shared_ptr<const TemplateSet> set) {
  std::lock_guard lock(mutex_);
  latest_ = std::move(set);
}

}  // namespace ic::templates
