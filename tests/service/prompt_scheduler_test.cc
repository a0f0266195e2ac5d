// The per-core prompt_text scheduler (service/prompt_scheduler.hh): one
// slice per reactor turn, tenants in round robin, admission bounds.

#include "service/prompt_scheduler.hh"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "fake_link.hh"
#include "index/clock.hh"

using ic::service::PromptScheduler;

namespace {

// A job that needs `slices` slices and logs each one as "<name><n>".
struct CountingJob final : PromptScheduler::Job {
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

TEST_CASE("prompt scheduler: one slice per turn, tenants take turns, admission bounds") {
  ic::test::FakeLink link(1);
  ic::index::ManualClock clock;
  auto scheduler = std::make_shared<PromptScheduler>(link, clock, 500, 4, 3);
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
