#pragma once
// Fan-out / fan-in over every core without blocking any reactor: posts a Task
// to each core that computes a value there, posts it back to the calling core,
// and the last reply (or the deadline) calls `done` on the calling core.
// Used by the /metrics scrape and the /snapshot collector.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "metrics/registry.hh"
#include "runtime/runtime.hh"

namespace ic::metrics {

struct GatherOptions {
  // After this long (µs) `done` runs with what arrived; missing cores are
  // std::nullopt (a core whose mailbox stayed full).
  std::int64_t deadline_us = 2'000'000;
  // A refused post (full mailbox) is retried after this delay, µs.
  std::int64_t retry_delay_us = 1'000;
};

namespace detail {
// Posts `task` to `core`, retrying on the calling reactor's timers while the
// mailbox is full, until `give_up_at_us` (monotonic µs) passes.
void post_with_retry(runtime::Runtime& rt, unsigned core, runtime::Task task,
                     std::int64_t retry_delay_us, std::int64_t give_up_at_us);
// Runs `fn` on the calling reactor after `delay_us`.
void after(std::int64_t delay_us, runtime::Task fn);
}  // namespace detail

// Precondition: called on a reactor thread of `rt`. `on_core(core)` runs on
// each core and returns its T (T must be movable); its captures must be safe
// to destroy on any core. `done(results)` runs exactly once on the calling
// core with results[core] set for every core that answered. Call as
// gather<T>(rt, on_core, done).
template <typename T>
void gather(runtime::Runtime& rt, std::function<T(unsigned core)> on_core,
            std::function<void(std::vector<std::optional<T>>)> done, GatherOptions options = {}) {
  struct State {
    std::vector<std::optional<T>> results;
    unsigned pending;
    bool finished = false;
    std::function<void(std::vector<std::optional<T>>)> done;
    // Moves `done` out so its captures die on the origin core, whatever core
    // drops the last reference to this state.
    void finish() {
      if (finished) return;
      finished = true;
      auto fn = std::move(done);
      fn(std::move(results));
    }
  };
  const unsigned origin = runtime::current_core();
  const unsigned cores = rt.cores();
  auto state = std::make_shared<State>();
  state->results.resize(cores);
  state->pending = cores;
  state->done = std::move(done);
  auto shared_fn = std::make_shared<std::function<T(unsigned)>>(std::move(on_core));
  const std::int64_t give_up = runtime::current_reactor().now_us() + options.deadline_us;
  // `state` is only ever touched on the origin core: replies are posted back.
  for (unsigned core = 0; core < cores; ++core) {
    detail::post_with_retry(
        rt, core,
        [&rt, core, origin, state, shared_fn, give_up, options]() mutable {
          T value = (*shared_fn)(core);
          detail::post_with_retry(
              rt, origin,
              [core, state, value = std::move(value)]() mutable {
                if (state->finished) return;
                state->results[core] = std::move(value);
                if (--state->pending == 0) state->finish();
              },
              options.retry_delay_us, give_up);
        },
        options.retry_delay_us, give_up);
  }
  detail::after(options.deadline_us, [state]() { state->finish(); });
}

}  // namespace ic::metrics
