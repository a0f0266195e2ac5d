#pragma once
// A single-threaded stand-in for the runtime's cores: per-core FIFO mailboxes
// with a settable capacity, run by hand, and timers on a manual clock that
// remember the core that armed them.

#include <deque>
#include <map>
#include <vector>

#include "runtime/cores.hh"

namespace ic::test {

class FakeLink final : public runtime::Cores, public runtime::Timers {
 public:
  explicit FakeLink(unsigned cores) : capacity(cores, 1u << 20), queues_(cores) {}

  unsigned cores() const override { return static_cast<unsigned>(queues_.size()); }
  unsigned current_core() const override { return current; }
  bool try_push(unsigned core, runtime::Task& task) override {
    ++posts;
    if (queues_[core].size() >= capacity[core]) {
      ++rejected;
      return false;
    }
    queues_[core].push_back(std::move(task));
    return true;
  }
  // Deferred work of the calling core joins its mailbox queue (run by run()).
  void defer(runtime::Task task) override { queues_[current].push_back(std::move(task)); }
  runtime::Timers& timers() override { return *this; }
  std::int64_t now_us() const override { return now; }
  TimerId add_timer(std::int64_t delay_us, runtime::Task task) override {
    const TimerId id = ++next_;
    timers_.emplace(id, Timer{now + delay_us, current, std::move(task)});
    return id;
  }
  void cancel_timer(TimerId id) override { timers_.erase(id); }

  // Runs queued tasks (each on its core) until every mailbox is empty.
  void run() {
    for (bool any = true; any;) {
      any = false;
      for (unsigned c = 0; c < queues_.size(); ++c) {
        while (!queues_[c].empty()) {
          runtime::Task t = std::move(queues_[c].front());
          queues_[c].pop_front();
          with_core(c, t);
          any = true;
        }
      }
    }
  }
  // Runs only core `core`'s mailbox once through.
  void run_core(unsigned core) {
    std::deque<runtime::Task> q;
    q.swap(queues_[core]);
    for (auto& t : q) with_core(core, t);
  }
  // Advances the clock and fires due timers on the core that armed them.
  void advance(std::int64_t us) {
    now += us;
    for (auto it = timers_.begin(); it != timers_.end();) {
      if (it->second.when > now) {
        ++it;
        continue;
      }
      Timer t = std::move(it->second);
      it = timers_.erase(it);
      with_core(t.core, t.task);
    }
  }
  std::size_t queued(unsigned core) const { return queues_[core].size(); }
  std::size_t pending_timers() const { return timers_.size(); }

  unsigned current = 0;
  std::int64_t now = 0;
  std::vector<std::size_t> capacity;
  int posts = 0;
  int rejected = 0;

 private:
  struct Timer {
    std::int64_t when;
    unsigned core;
    runtime::Task task;
  };
  void with_core(unsigned core, runtime::Task& t) {
    const unsigned saved = current;
    current = core;
    t();
    current = saved;
  }
  std::vector<std::deque<runtime::Task>> queues_;
  std::map<TimerId, Timer> timers_;
  TimerId next_ = 0;
};

}  // namespace ic::test
