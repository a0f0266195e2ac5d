#include "prompt_text/scheduler.hh"

#include <utility>

namespace ic::prompt_text {

Scheduler::Scheduler(runtime::Cores& cores, index::Clock& clock, std::int64_t slice_us,
                     std::size_t max_jobs, std::size_t max_jobs_per_tenant)
    : cores_(cores),
      clock_(clock),
      slice_us_(slice_us),
      max_jobs_(max_jobs),
      max_jobs_per_tenant_(max_jobs_per_tenant) {}

Scheduler::Tenant* Scheduler::find(std::string_view tenant) {
  for (const auto& t : tenants_) {
    if (t->id == tenant) return t.get();
  }
  return nullptr;
}

const Scheduler::Tenant* Scheduler::find(std::string_view tenant) const {
  for (const auto& t : tenants_) {
    if (t->id == tenant) return t.get();
  }
  return nullptr;
}

bool Scheduler::admits(std::string_view tenant) const {
  if (jobs_ >= max_jobs_) return false;
  const Tenant* t = find(tenant);
  return t == nullptr || t->jobs.size() < max_jobs_per_tenant_;
}

std::size_t Scheduler::jobs(std::string_view tenant) const {
  const Tenant* t = find(tenant);
  return t == nullptr ? 0 : t->jobs.size();
}

void Scheduler::add(std::string_view tenant, std::unique_ptr<Job> job) {
  Tenant* t = find(tenant);
  if (t == nullptr) {
    tenants_.push_back(std::make_unique<Tenant>());
    t = tenants_.back().get();
    t->id = tenant;
  }
  t->jobs.push_back(std::move(job));
  ++jobs_;
  arm();
}

void Scheduler::arm() {
  if (armed_ || jobs_ == 0) return;
  armed_ = true;
  std::weak_ptr<Scheduler> weak = weak_from_this();
  cores_.defer([weak] {
    if (const auto self = weak.lock()) self->turn();
  });
}

void Scheduler::turn() {
  armed_ = false;
  if (tenants_.empty()) return;
  if (next_ >= tenants_.size()) next_ = 0;
  const std::size_t ti = next_;
  Tenant& tenant = *tenants_[ti];
  std::unique_ptr<Job> job = std::move(tenant.jobs.front());
  tenant.jobs.pop_front();
  const bool over = job->run(clock_.monotonic_us() + slice_us_);
  // run() may have added jobs (never removed any): tenants_[ti] is still it.
  if (over) {
    --jobs_;
  } else {
    tenant.jobs.push_back(std::move(job));
  }
  if (tenant.jobs.empty()) {
    tenants_.erase(tenants_.begin() + static_cast<std::ptrdiff_t>(ti));
  } else {
    ++next_;
  }
  arm();
}

}  // namespace ic::prompt_text
