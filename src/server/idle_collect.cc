#include "server/idle_collect.hh"

#include <mimalloc.h>

namespace ic::server {

void IdleCollect::start(runtime::Reactor& reactor) {
  reactor_ = &reactor;
  reactor.add_turn_hook([this] { ++turns_; });
  reactor.add_timer(kTickUs, [this] { tick(); });
}

void IdleCollect::tick() {
  const std::uint64_t turns = turns_ - turns_at_tick_;
  turns_at_tick_ = turns_;
  if (quiet_.tick(turns)) {
    mi_collect(true);
    ++collections_;
  }
  reactor_->add_timer(kTickUs, [this] { tick(); });
}

}  // namespace ic::server
