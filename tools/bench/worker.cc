#include "bench/worker.hh"

#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <deque>

#include "common/interrupt.hh"
#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::tools::bench {
namespace {

class Loop {
 public:
  Loop(const WorkerPlan& plan, const Workload& workload,
       std::vector<std::unique_ptr<H2Connection>>& connections, WorkerResult* result)
      : plan_(plan),
        workload_(workload),
        conns_(connections),
        result_(result),
        armed_(connections.size(), false) {
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    timer_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kTimerTag;
    epoll_ctl(epoll_, EPOLL_CTL_ADD, timer_, &ev);
    for (std::size_t i = 0; i < conns_.size(); ++i) {
      ev.events = EPOLLIN;
      ev.data.u64 = i;
      epoll_ctl(epoll_, EPOLL_CTL_ADD, conns_[i]->fd(), &ev);
    }
    period_ns_ = plan.rate_per_s > 0 ? 1e9 / plan.rate_per_s : 0;
    next_seq_ = plan.order_offset;
  }
  ~Loop() {
    close(timer_);
    close(epoll_);
  }

  void run() {
    bool stopping = false;
    bool aborted = false;
    std::int64_t give_up_ns = 0;
    epoll_event events[64];
    while (true) {
      const std::int64_t now = now_ns();
      if (!stopping && (now >= plan_.end_ns || interrupted() || all_dead())) {
        stopping = true;
        // Ctrl-C or a dead server: a short drain and nothing new; the normal end: the full
        // drain, during which calls already due (and the backlog) still go out, late.
        aborted = now < plan_.end_ns;
        give_up_ns = aborted ? now + plan_.drain_ns / 4 : plan_.end_ns + plan_.drain_ns;
        if (aborted && period_ns_ > 0) {
          add_not_sent(now);
          result_->not_sent += backlog_.size();
          backlog_.clear();
        }
      }
      const bool issuing = !stopping || (period_ns_ > 0 && !aborted);
      if (issuing) issue(now);
      const std::uint64_t completed_before = result_->completed;
      flush_all();
      if (stopping && ((active() == 0 && backlog_.empty() && scheduled_all()) ||
                       now_ns() >= give_up_ns || all_dead())) {
        break;
      }
      // Answers read while flushing freed streams: use them before sleeping.
      if (issuing && result_->completed != completed_before) continue;
      arm_timer(stopping ? give_up_ns : next_wakeup());
      const int n = epoll_wait(epoll_, events, 64, -1);
      for (int i = 0; i < n; ++i) {
        if (events[i].data.u64 == kTimerTag) {
          std::uint64_t expirations = 0;
          [[maybe_unused]] auto r = read(timer_, &expirations, sizeof expirations);
          armed_at_ns_ = -1;
          continue;
        }
        conns_[events[i].data.u64]->pump();
      }
    }
    result_->unfinished += static_cast<std::uint64_t>(active());
    result_->not_sent += backlog_.size();
  }

 private:
  static constexpr std::uint64_t kTimerTag = ~std::uint64_t{0};

  int active() const {
    int total = 0;
    for (const auto& c : conns_) total += c->alive() ? c->active() : 0;
    return total;
  }
  bool all_dead() const {
    for (const auto& c : conns_) {
      if (c->alive()) return false;
    }
    return true;
  }

  // The connection with a free stream, round-robin; -1 when all are full or dead.
  int free_connection() {
    for (std::size_t tried = 0; tried < conns_.size(); ++tried) {
      const std::size_t i = cursor_++ % conns_.size();
      if (conns_[i]->alive() && conns_[i]->active() < plan_.streams) return static_cast<int>(i);
    }
    return -1;
  }

  void start_on(int conn, std::int64_t intended) {
    const auto& order = workload_.order;
    const auto body = workload_.bodies[order[next_seq_++ % order.size()]];
    conns_[static_cast<std::size_t>(conn)]->start(workload_.path, body, intended);
    ++result_->sent;
  }

  std::int64_t intended(std::uint64_t k) const {
    return plan_.start_ns + static_cast<std::int64_t>(static_cast<double>(k) * period_ns_);
  }

  void issue(std::int64_t now) {
    if (period_ns_ <= 0) {  // closed loop: keep every stream busy
      if (now < plan_.start_ns) return;
      for (int c = free_connection(); c >= 0; c = free_connection()) start_on(c, now_ns());
      return;
    }
    // Open loop: older intended calls first, then every call that has come due.
    while (!backlog_.empty()) {
      const int c = free_connection();
      if (c < 0) break;
      start_on(c, backlog_.front());
      backlog_.pop_front();
    }
    while (intended(scheduled_) <= now && intended(scheduled_) < plan_.end_ns) {
      const std::int64_t t = intended(scheduled_++);
      const int c = backlog_.empty() ? free_connection() : -1;
      if (c >= 0) {
        start_on(c, t);
      } else if (backlog_.size() < plan_.max_backlog) {
        backlog_.push_back(t);
      } else {
        ++result_->not_sent;
        ++result_->statuses["client-backlog-full"];
      }
    }
  }

  void add_not_sent(std::int64_t now) {
    // Intended calls the schedule never reached because the loop stopped early (Ctrl-C).
    const std::int64_t until = std::min(now, plan_.end_ns);
    while (intended(scheduled_) < until) {
      ++scheduled_;
      ++result_->not_sent;
    }
  }

  // Every intended call before end_ns has been started or queued (open loop).
  bool scheduled_all() const { return period_ns_ <= 0 || intended(scheduled_) >= plan_.end_ns; }

  std::int64_t next_wakeup() const {
    if (period_ns_ <= 0) return now_ns() < plan_.start_ns ? plan_.start_ns : plan_.end_ns;
    return std::min(intended(scheduled_), plan_.end_ns);
  }

  void arm_timer(std::int64_t at_ns) {
    if (at_ns == armed_at_ns_) return;  // already set: spare the syscall
    armed_at_ns_ = at_ns;
    itimerspec spec{};
    at_ns = std::max<std::int64_t>(at_ns, 1);
    spec.it_value.tv_sec = at_ns / 1'000'000'000;
    spec.it_value.tv_nsec = at_ns % 1'000'000'000;
    timerfd_settime(timer_, TFD_TIMER_ABSTIME, &spec, nullptr);
  }

  void flush_all() {
    for (std::size_t i = 0; i < conns_.size(); ++i) {
      auto& c = *conns_[i];
      if (!c.alive()) continue;
      c.flush();
      const bool want = c.alive() && c.wants_write();
      if (want != armed_[i]) {
        epoll_event ev{};
        ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
        ev.data.u64 = i;
        epoll_ctl(epoll_, EPOLL_CTL_MOD, c.fd(), &ev);
        armed_[i] = want;
      }
    }
  }

  const WorkerPlan& plan_;
  const Workload& workload_;
  std::vector<std::unique_ptr<H2Connection>>& conns_;
  WorkerResult* result_;
  std::vector<bool> armed_;
  int epoll_ = -1;
  int timer_ = -1;
  double period_ns_ = 0;
  std::uint64_t scheduled_ = 0;
  std::size_t next_seq_ = 0;
  std::size_t cursor_ = 0;
  std::deque<std::int64_t> backlog_;
  std::int64_t armed_at_ns_ = -1;
};

}  // namespace

void record_outcome(const WorkerPlan& plan, CallOutcome&& outcome, WorkerResult* result) {
  ++result->completed;
  result->last_done_ns = std::max(result->last_done_ns, outcome.done_ns);
  const auto latency_ns = std::max<std::int64_t>(outcome.done_ns - outcome.intended_ns, 0);
  result->latency_us.push_back(static_cast<std::uint64_t>(latency_ns / 1000));
  ++result->statuses[outcome.status];
  if (plan.decode_reasons && outcome.status == "OK") {
    inferencecache::v1alpha1::LookupRouteResponse response;
    if (response.ParseFromString(outcome.response)) ++result->reasons[response.reason_code()];
  }
}

void run_worker(const WorkerPlan& plan, const Workload& workload,
                std::vector<std::unique_ptr<H2Connection>>& connections, WorkerResult* result) {
  Loop loop(plan, workload, connections, result);
  loop.run();
}

}  // namespace ic::tools::bench
