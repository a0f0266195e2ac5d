#include "runtime/runtime.hh"
#include "support/runtime_fixture.hh"

#include <doctest/doctest.h>
#include <liburing.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace ic::runtime::testing;
using ic::runtime::Backend;
using ic::runtime::BackendChoice;

TEST_SUITE("runtime") {
  TEST_CASE("a task posted to another core runs there and can post back") {
    Runtime rt(opts(2));
    constexpr int kRoundTrips = 1000;
    Done done;
    std::atomic<int> wrong_core{0};
    int trips = 0;  // touched only on core 0
    std::function<void()> ping = [&] {
      if (trips == kRoundTrips) {
        done.set();
        return;
      }
      const bool ok = rt.post(1, [&] {
        if (current_core() != 1) wrong_core.fetch_add(1);
        const bool back = rt.post(0, [&] {
          if (current_core() != 0) wrong_core.fetch_add(1);
          ++trips;
          ping();
        });
        CHECK(back);
      });
      CHECK(ok);
    };
    rt.start([&](unsigned core) {
      if (core == 0) ping();
    });
    finish(rt, done);
    CHECK(trips == kRoundTrips);
    CHECK(wrong_core.load() == 0);
  }

  TEST_CASE("a full mailbox refuses the post; queued tasks run in order") {
    HeldCore1 h(4);
    std::vector<bool> accepted;
    h.run_on_core0([&] {
      for (int i = 0; i < 6; ++i) accepted.push_back(h.rt.post(1, h.record(i, 3)));
    });
    CHECK(accepted == std::vector<bool>{true, true, true, true, false, false});
    CHECK(h.ran == std::vector<int>{0, 1, 2, 3});
  }

  TEST_CASE("posts between one pair of cores keep their order") {
    Runtime rt(opts(2));
    constexpr int kPosts = 3000;
    Done done;
    int next = 0;
    int out_of_order = 0;
    rt.start([&](unsigned core) {
      if (core != 0) return;
      for (int i = 0; i < kPosts; ++i) {
        const bool ok = rt.post(1, [&, i] {
          if (i != next) ++out_of_order;
          ++next;
          if (next == kPosts) done.set();
        });
        REQUIRE(ok);
      }
    });
    finish(rt, done);
    CHECK(next == kPosts);
    CHECK(out_of_order == 0);
  }

  TEST_CASE("timers fire in deadline order and a cancelled one never fires") {
    Runtime rt(opts(1));
    Done done;
    std::string order;
    rt.start([&](unsigned) {
      auto& r = current_reactor();
      r.add_timer(30'000, [&] { order += 'c'; });
      r.add_timer(10'000, [&] { order += 'a'; });
      const auto cancelled = r.add_timer(15'000, [&] { order += 'x'; });
      r.add_timer(20'000, [&] { order += 'b'; });
      r.add_timer(0, [&] { order += '0'; });
      r.add_timer(40'000, [&] { done.set(); });
      r.cancel_timer(cancelled);
    });
    finish(rt, done);
    CHECK(order == "0abc");
  }

  TEST_CASE("a timer does not fire before its delay") {
    Runtime rt(opts(1));
    Done done;
    std::int64_t armed_at = 0;
    std::int64_t fired_at = 0;
    rt.start([&](unsigned) {
      auto& r = current_reactor();
      armed_at = r.now_us();
      r.add_timer(20'000, [&] {
        fired_at = current_reactor().now_us();
        done.set();
      });
    });
    finish(rt, done);
    CHECK(fired_at - armed_at >= 20'000);
  }

  TEST_CASE("a timer added while the reactor sleeps towards a later one fires first") {
    // The reactor sleeps with one io_uring timeout armed for its earliest
    // timer; a nearer timer added meanwhile moves it earlier, and one added
    // after it fired arms a new one (the scenario: runtime_fixture.hh).
    CHECK(nearer_timers_fire_first() == "bc");
  }

  TEST_CASE("defer and post-to-self run after the current task, in order") {
    Runtime rt(opts(2));
    Done done;
    std::string order;
    rt.start([&](unsigned core) {
      if (core != 1) return;
      auto& r = current_reactor();
      r.defer([&] { order += 'b'; });
      CHECK(rt.post(1, [&] { order += 'c'; }));
      r.defer([&] {
        order += 'd';
        // Deferred from a deferred task: runs in the next turn.
        current_reactor().defer([&] {
          order += 'e';
          done.set();
        });
      });
      order += 'a';
    });
    finish(rt, done);
    CHECK(order == "abcde");
  }

  TEST_CASE("a post from a non-reactor thread runs on the target core") {
    Runtime rt(opts(2));
    rt.start(nullptr);
    std::promise<unsigned> where;
    auto result = where.get_future();
    CHECK(rt.post(1, [&] { where.set_value(current_core()); }));
    REQUIRE(result.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
    CHECK(result.get() == 1);
    rt.stop();
    rt.join();
  }

  TEST_CASE("the ring takes the newest setup the kernel accepts, and names it") {
    constexpr unsigned kNewest = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
                                 IORING_SETUP_SUBMIT_ALL | IORING_SETUP_CQSIZE;
    // Does this kernel take the newest set? (6.1+; CI may run an older one.)
    io_uring probe{};
    io_uring_params params{};
    params.flags = kNewest;
    params.cq_entries = 64;
    const bool newest_ok = io_uring_queue_init_params(8, &probe, &params) == 0;
    if (newest_ok) io_uring_queue_exit(&probe);

    Runtime::Options o = opts(2);
    o.backend = BackendChoice::kIoUring;
    Runtime rt(o);
    Done done;
    std::atomic<unsigned> flags[2] = {0, 0};
    std::atomic<int> started{0};
    const std::string error = rt.start([&](unsigned core) {
      flags[core] = current_reactor().ring_setup_flags();
      if (started.fetch_add(1) + 1 == 2) done.set();
    });
    if (!error.empty()) {
      // io_uring refused here (`meson test --setup seccomp`): no ring to name.
      CHECK(error.rfind("io_uring_setup: Operation not permitted", 0) == 0);
      CHECK(started.load() == 0);
      return;
    }
    finish(rt, done);
    CHECK(flags[0].load() == flags[1].load());
    if (newest_ok) CHECK(flags[0].load() == kNewest);
    CHECK((flags[0].load() & ~(kNewest | IORING_SETUP_COOP_TASKRUN)) == 0);
    CHECK(ic::runtime::ring_setup_names(kNewest) ==
          "SINGLE_ISSUER|DEFER_TASKRUN|SUBMIT_ALL|CQSIZE");
    CHECK(ic::runtime::ring_setup_names(IORING_SETUP_COOP_TASKRUN | IORING_SETUP_CQSIZE) ==
          "COOP_TASKRUN|CQSIZE");
    CHECK(ic::runtime::ring_setup_names(0) == "none");
  }

  TEST_CASE("cores() honours the requested count and stop() ends every loop") {
    Runtime rt(opts(3));
    CHECK(rt.cores() == 3);
    std::atomic<int> started{0};
    rt.start([&](unsigned) { started.fetch_add(1); });
    while (started.load() < 3) std::this_thread::yield();
    rt.stop();
    rt.join();
    CHECK(started.load() == 3);
  }

  TEST_CASE("the runtime runs on the backend the test setup names (IC_REACTOR_BACKEND)") {
    Runtime rt(opts(2));
    Done done;
    std::atomic<int> on_epoll{0};
    std::atomic<int> started{0};
    REQUIRE(rt.start([&](unsigned) {
      if (current_reactor().backend() == Backend::kEpoll) on_epoll.fetch_add(1);
      if (started.fetch_add(1) + 1 == 2) done.set();
    }) == "");
    finish(rt, done);
    const std::string setup = ic::testing::reactor_backend_name();
    if (setup == "epoll") {
      CHECK(rt.backend() == Backend::kEpoll);
      CHECK(on_epoll.load() == 2);
      CHECK(rt.fallback_reason() == "");
    } else if (setup == "io_uring") {
      CHECK(rt.backend() == Backend::kIoUring);
      CHECK(on_epoll.load() == 0);
    } else {
      // auto: io_uring, or epoll with the reason io_uring was refused (the
      // seccomp test in tests/integration/transport refuses it for real).
      CHECK(rt.fallback_reason().empty() == (rt.backend() == Backend::kIoUring));
      CHECK(on_epoll.load() == (rt.backend() == Backend::kEpoll ? 2 : 0));
    }
  }

  TEST_CASE("epoll: cross-core round trips, timers and a post from outside run as on io_uring") {
    // Explicitly on epoll, whatever the setup: the eventfd wake replaces
    // MSG_RING, epoll_pwait2's timeout the io_uring timeout.
    Runtime::Options o = opts(2);
    o.backend = BackendChoice::kEpoll;
    Runtime rt(o);
    constexpr int kRoundTrips = 1000;
    Done done;
    std::atomic<int> wrong_core{0};
    int trips = 0;  // core 0 only
    std::int64_t armed_at = 0;
    std::int64_t fired_at = 0;
    std::function<void()> ping = [&] {
      if (trips == kRoundTrips) {
        armed_at = current_reactor().now_us();
        current_reactor().add_timer(20'000, [&] {
          fired_at = current_reactor().now_us();
          done.set();
        });
        return;
      }
      CHECK(rt.post(1, [&] {
        if (current_core() != 1) wrong_core.fetch_add(1);
        CHECK(rt.post(0, [&] {
          if (current_core() != 0) wrong_core.fetch_add(1);
          ++trips;
          ping();
        }));
      }));
    };
    REQUIRE(rt.start(nullptr) == "");
    CHECK(rt.backend() == Backend::kEpoll);
    CHECK(rt.reactor(0).ring_setup_flags() == 0);
    CHECK(rt.post(0, [&] { ping(); }));  // from this thread: the locked queue and the eventfd
    finish(rt, done);
    CHECK(trips == kRoundTrips);
    CHECK(wrong_core.load() == 0);
    CHECK(fired_at - armed_at >= 20'000);
  }

  TEST_CASE("backend names and the --reactor-backend spellings") {
    CHECK(ic::runtime::backend_name(Backend::kIoUring) == "io_uring");
    CHECK(ic::runtime::backend_name(Backend::kEpoll) == "epoll");
    CHECK(ic::runtime::parse_backend_choice("auto") == BackendChoice::kAuto);
    CHECK(ic::runtime::parse_backend_choice("io_uring") == BackendChoice::kIoUring);
    CHECK(ic::runtime::parse_backend_choice("epoll") == BackendChoice::kEpoll);
    CHECK_FALSE(ic::runtime::parse_backend_choice("uring").has_value());
    CHECK_FALSE(ic::runtime::parse_backend_choice("").has_value());
  }
}
