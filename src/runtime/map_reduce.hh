#pragma once
// Every core at once, on the one cross-core verb (runtime/submit.hh):
//   invoke_on_all  runs fn(core) on every core, no answer (the policy
//                  broadcast: waits on full mailboxes, never lost);
//   map_reduce     runs map(core) on every core and hands the values to
//                  done(values) on the calling core once all answered or the
//                  deadline passed (the /metrics scrape, /snapshot, the
//                  /policy fan-out).
// Neither blocks a reactor. The calling core's share also runs from a timer,
// never inside the call, so `done` never runs before map_reduce returned.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/submit.hh"

namespace ic::runtime {

// Runs `fn(core)` on every core, retrying full mailboxes from the calling
// core's timer every `wait.retry_us` (see Wait). `fn` is copied once per core.
inline void invoke_on_all(Cores& cores, const std::function<void(unsigned core)>& fn,
                          Wait wait = {}) {
  const unsigned here = cores.current_core();
  for (unsigned core = 0; core < cores.cores(); ++core) {
    if (core == here) {
      cores.timers().add_timer(0, [fn, core] { fn(core); });
      continue;
    }
    submit(
        cores, core, [fn, core] { fn(core); }, wait);
  }
}

struct MapReduceOptions {
  // After this long (µs) `done` runs with what arrived; a core that did not
  // answer (its mailbox stayed full) is std::nullopt.
  std::int64_t deadline_us = 2'000'000;
  // Delay between attempts through a full mailbox, µs.
  std::int64_t retry_us = 1'000;
};

// `map(core)` runs on each core and returns its T; `done(values)` runs exactly
// once on the calling core, values[core] set for every core that answered in
// time. `map`'s captures must be safe to destroy on any core; `done`'s are
// destroyed on the calling core. Call as map_reduce<T>(cores, map, done).
template <typename T>
void map_reduce(Cores& cores, std::function<T(unsigned core)> map,
                std::function<void(std::vector<std::optional<T>>)> done,
                MapReduceOptions options = {}) {
  // Touched on the calling core only: every reply comes back here.
  struct State {
    std::vector<std::optional<T>> values;
    unsigned pending = 0;
    std::function<void(std::vector<std::optional<T>>)> done;
    void finish() {
      if (!done) return;
      auto fn = std::move(done);
      done = nullptr;
      fn(std::move(values));
    }
  };
  auto state = std::make_shared<State>();
  state->values.resize(cores.cores());
  state->pending = cores.cores();
  state->done = std::move(done);
  auto shared_map = std::make_shared<std::function<T(unsigned)>>(std::move(map));
  const Wait wait{options.retry_us, options.deadline_us};
  const unsigned here = cores.current_core();
  for (unsigned core = 0; core < cores.cores(); ++core) {
    auto fn = [shared_map](unsigned& at) { return (*shared_map)(at); };
    auto reply = [state, core](T value) {
      if (!state->done) return;
      state->values[core] = std::move(value);
      if (--state->pending == 0) state->finish();
    };
    if (core == here) {
      cores.timers().add_timer(0, [fn, reply, core]() mutable {
        unsigned at = core;
        reply(fn(at));
      });
      continue;
    }
    submit_to(cores, core, core, std::move(fn), std::move(reply), wait);
  }
  cores.timers().add_timer(options.deadline_us, [state] { state->finish(); });
}

}  // namespace ic::runtime
