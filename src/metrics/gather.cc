#include "metrics/gather.hh"

namespace ic::metrics::detail {

void after(std::int64_t delay_us, runtime::Task fn) {
  runtime::current_reactor().add_timer(delay_us, std::move(fn));
}

void post_with_retry(runtime::Runtime& rt, unsigned core, runtime::Task task,
                     std::int64_t retry_delay_us, std::int64_t give_up_at_us) {
  // Runtime::post consumes the task even when it refuses it, so keep it in a
  // shared box and post a thin forwarder; a refusal leaves the box intact.
  auto box = std::make_shared<runtime::Task>(std::move(task));
  const bool accepted = rt.post(core, [box]() { (*box)(); });
  local().add_cross_core_post(accepted);
  if (accepted) return;
  runtime::Reactor& reactor = runtime::current_reactor();
  if (reactor.now_us() >= give_up_at_us) return;  // the gather deadline answers instead
  reactor.add_timer(retry_delay_us, [&rt, core, box, retry_delay_us, give_up_at_us]() {
    post_with_retry(rt, core, std::move(*box), retry_delay_us, give_up_at_us);
  });
}

}  // namespace ic::metrics::detail
