#pragma once
// Per-core scheduler of the tokenizing of untrusted text (docs/prompt-text.md
// "Where it runs and its bounds"): every call whose text must be tokenized on
// the reactor waits here as a job — LookupRoute's prompt_text
// (service/index_methods.cc), the endpoint picker's chat and completion bodies
// (gateway/ext_proc.cc) and RenderTemplate's stable text
// (templates/render_method.cc) — and each reactor turn runs one slice of one
// job, so a turn spends at most about one slice (slice_us) on tokenizing
// whatever the texts are, and every other connection of the core is served
// between two slices.
//
// One scheduler per core, shared by the three surfaces (the server makes it
// where it wires the core, src/server/app.cc), so the bounds below hold for
// a core whatever surface the texts came from.
//
// Fairness: tenants take turns (round robin over the tenants with a job,
// then over each tenant's jobs), so one tenant's many or long texts cannot
// starve another tenant's. Admission: at most max_jobs jobs and
// max_jobs_per_tenant per tenant, counted over every surface; the caller
// answers one more without tokenizing (each surface says how: LookupRoute and
// the picker fail open as `busy`, RenderTemplate RESOURCE_EXHAUSTED).
//
// Touched only on its core. Runs its turns with runtime::Cores::defer.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "index/clock.hh"
#include "runtime/cores.hh"

namespace ic::prompt_text {

class Scheduler : public std::enable_shared_from_this<Scheduler> {
 public:
  class Job {
   public:
    virtual ~Job() = default;
    // Runs one slice, until `slice_end_mono_us` (index clock); true when the
    // job is over (it answered its call or gave up), then it is destroyed.
    virtual bool run(std::int64_t slice_end_mono_us) = 0;
  };

  // `cores` and `clock` (the core's, the index's) outlive the scheduler.
  // `slice_us`: the longest slice a job is given per turn (µs).
  Scheduler(runtime::Cores& cores, index::Clock& clock, std::int64_t slice_us, std::size_t max_jobs,
            std::size_t max_jobs_per_tenant);

  // True when a job of `tenant` would be admitted now.
  bool admits(std::string_view tenant) const;
  // Queues `job` (admits(tenant) was true); its first slice runs at the end
  // of this turn at the earliest.
  void add(std::string_view tenant, std::unique_ptr<Job> job);
  // The clock slice ends are read on (Job::run's `slice_end_mono_us`).
  index::Clock& clock() const { return clock_; }
  // Jobs waiting or running, of every tenant / of `tenant`.
  std::size_t jobs() const { return jobs_; }
  std::size_t jobs(std::string_view tenant) const;

 private:
  struct Tenant {
    std::string id;
    std::deque<std::unique_ptr<Job>> jobs;
  };
  Tenant* find(std::string_view tenant);
  const Tenant* find(std::string_view tenant) const;
  void arm();
  // One slice of the next tenant's next job.
  void turn();

  runtime::Cores& cores_;
  index::Clock& clock_;
  std::int64_t slice_us_;
  std::size_t max_jobs_, max_jobs_per_tenant_;
  std::vector<std::unique_ptr<Tenant>> tenants_;  // those with a job, in round-robin order
  std::size_t next_ = 0;                          // the tenant whose job runs next
  std::size_t jobs_ = 0;
  bool armed_ = false;
};

}  // namespace ic::prompt_text
