#include "runtime/submit.hh"

#include <climits>

namespace ic::runtime::detail {

std::int64_t give_up_at(Cores& cores, const Wait& wait) {
  if (wait.give_up_after_us < 0) return INT64_MAX;
  return cores.timers().now_us() + wait.give_up_after_us;
}

void push_or_wait(Cores& cores, unsigned core, Task task, std::int64_t retry_us,
                  std::int64_t give_up_at_us) {
  if (cores.try_push(core, task)) return;
  Timers& timers = cores.timers();
  if (timers.now_us() >= give_up_at_us) return;  // dropped here, on the calling core
  timers.add_timer(retry_us,
                   [&cores, core, task = std::move(task), retry_us, give_up_at_us]() mutable {
                     push_or_wait(cores, core, std::move(task), retry_us, give_up_at_us);
                   });
}

}  // namespace ic::runtime::detail
