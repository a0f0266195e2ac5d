// The cross-core verb (runtime/submit.hh) and the all-cores forms
// (runtime/map_reduce.hh) on a real two-core Runtime.
#include "runtime/submit.hh"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <latch>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "runtime/map_reduce.hh"
#include "runtime/runtime.hh"
#include "support/runtime_fixture.hh"

namespace {

using namespace ic::runtime::testing;

// Move-only: the refused argument can only come back by move, as it went.
struct Payload {
  std::string text;
  std::unique_ptr<int> owned;
};

}  // namespace

TEST_SUITE("runtime") {
  TEST_CASE("submit to the calling core runs inline, before the call returns") {
    Runtime rt(opts(2));
    Done done;
    std::string order;
    int arg_seen_at = 0;
    rt.start([&](unsigned core) {
      if (core != 0) return;
      order += 'a';
      CHECK_FALSE(ic::runtime::try_submit(rt, 0, [&] { order += 'b'; }));
      order += 'c';
      int value = 41;
      // The local round trip hands fn the caller's own object: no copy, no move.
      auto refused = ic::runtime::try_submit_to(
          rt, 0, value,
          [&](int& v) {
            arg_seen_at = (&v == &value) ? 1 : -1;
            return v + 1;
          },
          [&](int result) { order += std::to_string(result); });
      CHECK_FALSE(refused);
      order += 'd';
      done.set();
    });
    finish(rt, done);
    CHECK(order == "abc42d");
    CHECK(arg_seen_at == 1);
  }

  TEST_CASE("the reply runs on the calling core with the target core's result") {
    Runtime rt(opts(2));
    Done done;
    unsigned ran_on = 99;
    unsigned replied_on = 99;
    std::string reply_text;
    rt.start([&](unsigned core) {
      if (core != 0) return;
      auto refused = ic::runtime::try_submit_to(
          rt, 1, std::string("ping"),
          [&](std::string& s) {
            ran_on = current_core();
            return s + "/pong@" + std::to_string(current_core());
          },
          [&](std::string result) {
            replied_on = current_core();
            reply_text = std::move(result);
            done.set();
          });
      CHECK_FALSE(refused);
    });
    finish(rt, done);
    CHECK(ran_on == 1);
    CHECK(replied_on == 0);
    CHECK(reply_text == "ping/pong@1");
  }

  TEST_CASE("a full mailbox hands the refused work back intact; the bound is the depth") {
    HeldCore1 h(4);
    std::vector<bool> accepted;
    std::string back_text;
    int back_owned = 0;
    int fn_refused_value = 0;
    h.run_on_core0([&] {
      for (int i = 0; i < 4; ++i) {
        accepted.push_back(!ic::runtime::try_submit(h.rt, 1, h.record(i, 3)));
      }
      // The fifth: the one-way form returns the callable itself...
      auto fn = ic::runtime::try_submit(h.rt, 1, [v = 7] { return v; });
      REQUIRE(fn);
      fn_refused_value = (*fn)();
      // ...and the round trip returns its argument, never run, never copied.
      auto arg = ic::runtime::try_submit_to(
          h.rt, 1, Payload{"request", std::make_unique<int>(5)}, [](Payload& p) { return p.text; },
          [](std::string) { FAIL("reply of refused work"); });
      REQUIRE(arg);
      back_text = arg->text;
      back_owned = arg->owned ? *arg->owned : -1;
    });
    CHECK(accepted == std::vector<bool>{true, true, true, true});
    CHECK(h.ran == std::vector<int>{0, 1, 2, 3});
    CHECK(fn_refused_value == 7);
    CHECK(back_text == "request");
    CHECK(back_owned == 5);
  }

  TEST_CASE("a waiting submit retries from the caller's timer until accepted") {
    Runtime rt(opts(2, 1));
    std::latch held(1);
    Done done;
    std::vector<int> ran;  // core 1 only
    unsigned replied_on = 99;
    rt.start([&](unsigned core) {
      if (core == 1) {
        held.wait();
        return;
      }
      CHECK_FALSE(ic::runtime::try_submit(rt, 1, [&ran] { ran.push_back(1); }));
      // The mailbox (depth 1) is full: these two wait, in order, on core 0's timer.
      ic::runtime::submit(
          rt, 1, [&ran] { ran.push_back(2); }, ic::runtime::Wait{.retry_us = 200});
      ic::runtime::submit_to(
          rt, 1, 3, [&ran](int& v) { ran.push_back(v); },
          [&] {
            replied_on = current_core();
            done.set();
          },
          ic::runtime::Wait{.retry_us = 200});
      held.count_down();
    });
    finish(rt, done);
    CHECK(ran == std::vector<int>{1, 2, 3});
    CHECK(replied_on == 0);
  }

  TEST_CASE("a waiting submit gives up after its bound, dropping the work unrun") {
    Runtime rt(opts(2, 1));
    std::latch held(1);
    Done done;
    std::atomic<int> ran{0};
    auto token = std::make_shared<int>(0);
    std::weak_ptr<int> watch = token;
    bool dropped_on_core0 = false;
    rt.start([&](unsigned core) {
      if (core == 1) {
        held.wait();  // released only after the give-up
        return;
      }
      CHECK_FALSE(ic::runtime::try_submit(rt, 1, [&ran] { ran.fetch_add(1); }));
      ic::runtime::submit(
          rt, 1, [&ran, t = std::move(token)] { ran.fetch_add(10); },
          ic::runtime::Wait{.retry_us = 500, .give_up_after_us = 5'000});
      ic::runtime::current_reactor().add_timer(50'000, [&] {
        dropped_on_core0 = watch.expired();
        held.count_down();
        // FIFO per core pair: this runs after the task that filled the box.
        ic::runtime::submit(rt, 1, [&done] { done.set(); });
      });
    });
    finish(rt, done);
    CHECK(dropped_on_core0);
    CHECK(ran.load() == 1);
  }

  TEST_CASE("map_reduce reduces every core's value on the calling core") {
    Runtime rt(opts(3));
    Done done;
    std::vector<std::optional<unsigned>> values;
    unsigned done_on = 99;
    bool returned_first = false;
    bool returned = false;  // core 1 only
    rt.start([&](unsigned core) {
      if (core != 1) return;
      ic::runtime::map_reduce<unsigned>(
          rt, [](unsigned c) { return (c + 1) * 100 + current_core(); },
          [&](std::vector<std::optional<unsigned>> v) {
            returned_first = returned;
            done_on = current_core();
            values = std::move(v);
            done.set();
          });
      returned = true;
    });
    finish(rt, done);
    REQUIRE(values.size() == 3);
    CHECK(values[0] == 100u);
    CHECK(values[1] == 201u);
    CHECK(values[2] == 302u);
    unsigned sum = 0;
    for (const auto& v : values) sum += v.value_or(0);
    CHECK(sum == 603u);
    CHECK(done_on == 1);
    CHECK(returned_first);
  }

  TEST_CASE("map_reduce leaves a core that did not answer by the deadline empty") {
    Runtime rt(opts(2, 1));
    std::latch held(1);
    Done done;
    std::vector<std::optional<int>> values;
    rt.start([&](unsigned core) {
      if (core == 1) {
        held.wait();
        return;
      }
      CHECK_FALSE(ic::runtime::try_submit(rt, 1, [] {}));  // fills the depth-1 mailbox
      ic::runtime::map_reduce<int>(
          rt, [](unsigned c) { return static_cast<int>(c) + 10; },
          [&](std::vector<std::optional<int>> v) {
            values = std::move(v);
            held.count_down();
            done.set();
          },
          {.deadline_us = 20'000, .retry_us = 1'000});
    });
    finish(rt, done);
    REQUIRE(values.size() == 2);
    CHECK(values[0] == 10);
    CHECK_FALSE(values[1].has_value());
  }

  TEST_CASE("invoke_on_all runs on every core, through full mailboxes") {
    Runtime rt(opts(3, 1));
    std::latch held(1);
    Done done;
    std::vector<std::atomic<int>> seen(3);
    std::atomic<int> count{0};
    rt.start([&](unsigned core) {
      if (core == 2) {
        held.wait();
        return;
      }
      if (core != 0) return;
      CHECK_FALSE(ic::runtime::try_submit(rt, 2, [] {}));  // core 2's box from 0 is full
      ic::runtime::invoke_on_all(
          rt,
          [&](unsigned c) {
            seen[c].store(static_cast<int>(current_core()) + 1);
            if (count.fetch_add(1) == 2) done.set();
          },
          ic::runtime::Wait{.retry_us = 200});
      held.count_down();
    });
    finish(rt, done);
    CHECK(seen[0].load() == 1);
    CHECK(seen[1].load() == 2);
    CHECK(seen[2].load() == 3);
  }
}
