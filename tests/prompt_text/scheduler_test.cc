// The per-core scheduler of tokenizing jobs (prompt_text/scheduler.hh): one
// slice per reactor turn, tenants in round robin, admission bounds, all of
// them over every surface's jobs.

#include "prompt_text/scheduler.hh"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "index/clock.hh"
#include "service/fake_link.hh"

using ic::prompt_text::Scheduler;

namespace {

// A job that needs `slices` slices and logs each one as "<name><n>".
struct CountingJob final : Scheduler::Job {
  CountingJob(std::string n, int s, std::vector<std::string>& l)
      : name(std::move(n)), slices(s), log(l) {}
  bool run(std::int64_t) override {
    log.push_back(name + std::to_string(++ran));
    return ran == slices;
  }
  std::string name;
  int slices;
  int ran = 0;
  std::vector<std::string>& log;
};

}  // namespace

TEST_CASE("scheduler: one slice per turn, tenants take turns, admission bounds") {
  ic::test::FakeLink link(1);
  ic::index::ManualClock clock;
  auto scheduler = std::make_shared<Scheduler>(link, clock, 500, 4, 3);
  std::vector<std::string> log;
  for (const char* name : {"a", "b", "c"}) {
    REQUIRE(scheduler->admits("A"));
    scheduler->add("A", std::make_unique<CountingJob>(name, 3, log));
  }
  CHECK_FALSE(scheduler->admits("A"));  // 3 per tenant
  REQUIRE(scheduler->admits("B"));
  scheduler->add("B", std::make_unique<CountingJob>("x", 2, log));
  CHECK_FALSE(scheduler->admits("C"));  // 4 per core
  CHECK(log.empty());                   // nothing runs inside add()
  int turns = 0;
  while (scheduler->jobs() > 0 && turns < 100) {
    REQUIRE(link.queued(0) == 1);  // one deferred turn at a time
    const std::size_t before = log.size();
    link.run_core(0);
    CHECK(log.size() == before + 1);  // exactly one slice per turn
    ++turns;
  }
  CHECK(turns == 11);
  // B's one job does not wait behind all of A's: A and B alternate.
  CHECK(log ==
        std::vector<std::string>{"a1", "x1", "b1", "x2", "c1", "a2", "b2", "c2", "a3", "b3", "c3"});
  CHECK(link.queued(0) == 0);
  CHECK(scheduler->admits("C"));
}

TEST_CASE("scheduler: one per core for every surface; admission and turns count all their jobs") {
  // The server gives one scheduler per core to LookupRoute (prompt_text),
  // the endpoint picker (chat bodies) and RenderTemplate (stable text): a
  // tenant's jobs of the three surfaces share its slots, and a tenant with
  // jobs on several surfaces gets one turn per round like any other.
  ic::test::FakeLink link(1);
  ic::index::ManualClock clock;
  auto scheduler = std::make_shared<Scheduler>(link, clock, 500, 6, 4);
  std::vector<std::string> log;
  // Tenant A: a lookup, a pick and a render; tenant B: one pick.
  scheduler->add("A", std::make_unique<CountingJob>("lookup", 2, log));
  scheduler->add("A", std::make_unique<CountingJob>("pick", 2, log));
  scheduler->add("A", std::make_unique<CountingJob>("render", 1, log));
  scheduler->add("B", std::make_unique<CountingJob>("Bpick", 3, log));
  CHECK(scheduler->jobs() == 4);
  CHECK(scheduler->jobs("A") == 3);
  CHECK(scheduler->jobs("B") == 1);
  REQUIRE(scheduler->admits("A"));  // A's 4th job, whatever its surface
  scheduler->add("A", std::make_unique<CountingJob>("render2", 1, log));
  CHECK_FALSE(scheduler->admits("A"));  // 4 per tenant, counted over the surfaces
  REQUIRE(scheduler->admits("C"));
  scheduler->add("C", std::make_unique<CountingJob>("Crender", 1, log));
  CHECK_FALSE(scheduler->admits("C"));  // 6 per core: the core is full for everyone
  CHECK_FALSE(scheduler->admits("B"));
  int turns = 0;
  while (scheduler->jobs() > 0 && turns < 100) {
    link.run_core(0);
    ++turns;
  }
  CHECK(turns == 10);
  // A, B and C in turn; A's own jobs in turn whatever their surface.
  CHECK(log == std::vector<std::string>{"lookup1", "Bpick1", "Crender1", "pick1", "Bpick2",
                                        "render1", "Bpick3", "render21", "lookup2", "pick2"});
  CHECK(scheduler->jobs("A") == 0);
  CHECK(scheduler->admits("A"));
}

TEST_CASE(
    "scheduler: a job's slice ends slice_us after the turn starts, on the scheduler's clock") {
  ic::test::FakeLink link(1);
  ic::index::ManualClock clock;
  clock.mono = 1'000;
  auto scheduler = std::make_shared<Scheduler>(link, clock, 250, 4, 4);
  CHECK(&scheduler->clock() == &clock);
  struct EndJob final : Scheduler::Job {
    std::vector<std::int64_t>& ends;
    explicit EndJob(std::vector<std::int64_t>& e) : ends(e) {}
    bool run(std::int64_t end) override {
      ends.push_back(end);
      return ends.size() == 2;
    }
  };
  std::vector<std::int64_t> ends;
  scheduler->add("A", std::make_unique<EndJob>(ends));
  link.run_core(0);
  clock.mono = 5'000;
  link.run_core(0);
  CHECK(ends == std::vector<std::int64_t>{1'250, 5'250});
  CHECK(scheduler->jobs() == 0);
}
