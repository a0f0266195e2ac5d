// The per-core io_uring event loop (docs/architecture.md rules 1, 2, 4).

#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "runtime/reactor_impl.hh"

namespace ic::runtime {

namespace {

constexpr unsigned kRingEntries = 2048;
// Completion queue entries (IORING_SETUP_CQSIZE; the default is twice the
// submission queue): multishot accepts and receives post several completions
// per submission, and a turn that reaps kCqeBudget at a time must not push
// the kernel into its overflow list.
constexpr unsigned kCqEntries = 4 * kRingEntries;
// Shared receive buffers per core: enough for a full CQE batch of reads of
// typical request sizes; a read that finds none fails with ENOBUFS and is
// simply re-armed (the bytes wait in the socket).
constexpr std::uint16_t kRecvBufferGroup = 0;
constexpr std::uint16_t kRecvBufferCount = 256;
constexpr std::uint32_t kRecvBufferBytes = 16 * 1024;
constexpr std::uint64_t kSlotMask = 0xffffffffull;
constexpr std::uint32_t kGenerationMask = 0xffffffu;
// How long the stop drain waits for in-flight I/O to complete after the stop
// hooks cancelled it.
constexpr std::int64_t kStopDrainUs = 2'000'000;

std::int64_t clock_us(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000 + ts.tv_nsec / 1000;
}

std::uint64_t encode(std::uint32_t slot, std::uint32_t generation, std::uint8_t op) {
  return (std::uint64_t{op} << 56) | (std::uint64_t{generation & kGenerationMask} << 32) | slot;
}

}  // namespace

Reactor::Impl::Impl(Runtime& rt, unsigned core_index) : runtime(rt), core(core_index) {
  event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  now_us = clock_us(CLOCK_MONOTONIC);
  wall_us = clock_us(CLOCK_REALTIME);
}

Reactor::Impl::~Impl() {
  exit_ring();
  if (event_fd >= 0) ::close(event_fd);
}

void Reactor::Impl::init_ring() {
  // The setup liburing's own examples use, newest first, each step dropping
  // what an older kernel refuses with EINVAL (docs/architecture.md rule 1):
  // DEFER_TASKRUN (6.1) runs completion work only when this thread asks for
  // events, so a wake-up is one io_uring_enter that both submits and reaps;
  // SINGLE_ISSUER (6.0) lets the kernel skip submission locking; COOP_TASKRUN
  // (5.19) delivers completions on our own transitions instead of by IPI;
  // SUBMIT_ALL keeps submitting the batch past a failed SQE; CQSIZE gives the
  // completion queue room for a full turn of multishot accepts and receives.
  constexpr unsigned kSetups[] = {
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SUBMIT_ALL |
          IORING_SETUP_CQSIZE,
      IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SUBMIT_ALL |
          IORING_SETUP_CQSIZE,
      IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_CQSIZE,
      IORING_SETUP_CQSIZE,
      0,
  };
  int rc = -EINVAL;
  for (const unsigned flags : kSetups) {
    io_uring_params params{};
    params.flags = flags;
    params.cq_entries = kCqEntries;
    rc = io_uring_queue_init_params(kRingEntries, &ring, &params);
    if (rc == 0) {
      ring_flags = flags;
      // Timeout updates (5.11) and CQE_SKIP_SUCCESS (5.17) predate
      // DEFER_TASKRUN (6.1).
      single_timeout = (flags & IORING_SETUP_DEFER_TASKRUN) != 0;
      break;
    }
    if (rc != -EINVAL) break;  // ENOMEM, EPERM...: no flag choice helps
  }
  if (rc < 0) throw std::runtime_error(std::string("io_uring_queue_init: ") + std::strerror(-rc));
  ring_ready = true;
  // A registered ring fd saves the file lookup on every io_uring_enter
  // (5.18); best effort.
  io_uring_register_ring_fd(&ring);
  recv_buffers =
      std::make_unique<BufferRing>(ring, kRecvBufferGroup, kRecvBufferCount, kRecvBufferBytes);
  if (!recv_buffers->ok()) recv_buffers.reset();
  arm_event_read();
}

void Reactor::Impl::exit_ring() {
  if (!ring_ready) return;
  recv_buffers.reset();
  io_uring_queue_exit(&ring);
  ring_ready = false;
}

io_uring_sqe* Reactor::Impl::get_sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  while (sqe == nullptr) {
    io_uring_submit(&ring);
    sqe = io_uring_get_sqe(&ring);
  }
  return sqe;
}

void Reactor::Impl::arm_event_read() {
  io_uring_sqe* sqe = get_sqe();
  io_uring_prep_read(sqe, event_fd, &event_buf, sizeof event_buf, 0);
  io_uring_sqe_set_data64(sqe, kEventUserData);
}

void Reactor::Impl::kick() {
  const std::uint64_t one = 1;
  // EAGAIN means the counter is saturated: the reactor is already due to wake.
  [[maybe_unused]] ssize_t n = ::write(event_fd, &one, sizeof one);
}

void Reactor::Impl::post_external(Task task) {
  {
    std::lock_guard lock(external_mu);
    external.push_back(std::move(task));
    external_pending.store(true, std::memory_order_release);
  }
  kick();
}

void Reactor::Impl::request_stop() {
  stop_requested.store(true, std::memory_order_release);
  kick();
}

void Reactor::Impl::note_wake(unsigned target) {
  if (wake_marked[target]) return;
  wake_marked[target] = 1;
  wake_targets.push_back(target);
}

void Reactor::Impl::read_clocks() {
  now_us = clock_us(CLOCK_MONOTONIC);
  wall_us = clock_us(CLOCK_REALTIME);
}

bool Reactor::Impl::drain_mailboxes() {
  bool more = false;
  const unsigned n = runtime.cores();
  Task task;
  for (unsigned from = 0; from < n; ++from) {
    if (from == core) continue;
    auto& box = runtime.impl_->box(from, core);
    unsigned budget = kMailboxBudget;
    while (budget > 0 && box.try_pop(task)) {
      --budget;
      task();
      task = Task{};
    }
    if (budget == 0) more = true;
  }
  return more;
}

bool Reactor::Impl::drain_external() {
  if (!external_pending.load(std::memory_order_acquire)) return false;
  std::vector<Task> batch;
  {
    std::lock_guard lock(external_mu);
    batch.swap(external);
    external_pending.store(false, std::memory_order_relaxed);
  }
  for (Task& t : batch) t();
  return false;
}

void Reactor::Impl::dispatch(std::uint64_t user_data, std::int32_t res, std::uint32_t flags) {
  if (user_data == kUntrackedUserData || user_data == kWakeUserData) return;
  if (user_data == kEventUserData) {
    if (ring_ready) arm_event_read();
    return;
  }
  if (user_data == kTimeoutUpdateUserData ||
      (user_data >= kTimeoutBase && user_data <= kTimeoutBase + kTimeoutSeqMask)) {
    on_timeout_cqe(user_data, res);
    return;
  }
  if (user_data >= kWakeSentBase && user_data < kWakeSentBase + runtime.cores()) {
    // Our MSG_RING failed (its CQE only comes on failure): the target's flag
    // says a wake is in flight, so no later post would wake it; the eventfd does.
    runtime.reactor(static_cast<unsigned>(user_data - kWakeSentBase)).impl_->kick();
    return;
  }
  const auto slot = static_cast<std::uint32_t>(user_data & kSlotMask);
  const auto generation = static_cast<std::uint32_t>((user_data >> 32) & kGenerationMask);
  const auto op = static_cast<std::uint8_t>(user_data >> 56);
  if (slot >= io.size()) return;
  IoEntry& entry = io[slot];
  if (entry.handler == nullptr || entry.generation != generation) return;
  entry.handler->on_completion(op, res, flags);
}

bool Reactor::Impl::reap_completions() {
  // The whole batch in place, one cq_advance at the end (liburing's
  // io_uring_for_each_cqe). A handler that submits does not move the head,
  // so the entries stay valid until we advance.
  unsigned head = 0;
  unsigned n = 0;
  io_uring_cqe* cqe = nullptr;
  io_uring_for_each_cqe(&ring, head, cqe) {
    dispatch(cqe->user_data, cqe->res, cqe->flags);
    if (++n == kCqeBudget) break;
  }
  io_uring_cq_advance(&ring, n);
  return n == kCqeBudget;
}

bool Reactor::Impl::fire_timers() {
  for (unsigned budget = kTimerBudget; budget > 0; --budget) {
    Task task = timers.pop_due(now_us);
    if (!task) return false;
    task();
  }
  return true;
}

bool Reactor::Impl::run_deferred() {
  running.swap(deferred);
  for (Task& t : running) t();
  running.clear();
  return !deferred.empty();
}

void Reactor::Impl::send_wakeups() {
  for (unsigned target : wake_targets) {
    wake_marked[target] = 0;
    Reactor::Impl& peer = *runtime.reactor(target).impl_;
    if (peer.notified.exchange(true, std::memory_order_acq_rel)) continue;
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_msg_ring(sqe, peer.ring.ring_fd, 0, kWakeUserData, 0);
    io_uring_sqe_set_data64(sqe, kWakeSentBase + target);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
  }
  wake_targets.clear();
}

void Reactor::Impl::wait(bool more_work) {
  if (more_work || stop_requested.load(std::memory_order_acquire)) {
    io_uring_submit_and_get_events(&ring);
    return;
  }
  const auto next = timers.next_deadline();
  if (!next) {
    io_uring_submit_and_wait(&ring, 1);
    return;
  }
  const std::int64_t delay = *next - clock_us(CLOCK_MONOTONIC);
  if (delay <= 0) {
    io_uring_submit_and_get_events(&ring);
    return;
  }
  if (single_timeout) {
    // One io_uring_enter per sleep, which also submits this turn's SQEs.
    // (liburing 2.3's submit_and_wait_timeout submits in one enter and waits
    // in a second: two per wake-up at moderate load.)
    arm_sleep_timeout(*next);
    io_uring_submit_and_wait(&ring, 1);
    return;
  }
  __kernel_timespec ts{};
  ts.tv_sec = delay / 1'000'000;
  ts.tv_nsec = (delay % 1'000'000) * 1000;
  io_uring_cqe* cqe = nullptr;
  io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &ts, nullptr);
}

void Reactor::Impl::arm_sleep_timeout(std::int64_t deadline_us) {
  // An armed timeout that fires no later than needed stays: waking at it
  // early costs one empty turn, re-arming on every sleep costs a timeout
  // SQE and CQE per wake-up. The kernel reads the timespec during the
  // submit, after this frame is gone: it is a member (timeout_ts).
  if (timeout_at != 0 && timeout_at <= deadline_us) return;
  __kernel_timespec& ts = timeout_ts;
  ts.tv_sec = deadline_us / 1'000'000;
  ts.tv_nsec = (deadline_us % 1'000'000) * 1000;
  io_uring_sqe* sqe = get_sqe();
  const std::uint64_t armed = kTimeoutBase + (timeout_seq & kTimeoutSeqMask);
  if (timeout_at != 0) {
    io_uring_prep_timeout_update(sqe, &ts, armed, IORING_TIMEOUT_ABS);
    io_uring_sqe_set_data64(sqe, kTimeoutUpdateUserData);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
  } else {
    ++timeout_seq;
    io_uring_prep_timeout(sqe, &ts, 0, IORING_TIMEOUT_ABS);
    io_uring_sqe_set_data64(sqe, kTimeoutBase + (timeout_seq & kTimeoutSeqMask));
  }
  timeout_at = deadline_us;
}

void Reactor::Impl::on_timeout_cqe(std::uint64_t user_data, std::int32_t res) {
  if (user_data == kTimeoutUpdateUserData) {
    // -ENOENT: it fired meanwhile and its own CQE says so. Anything else:
    // it still runs at its old deadline; the next sleep arms a new one (the
    // old one's CQE is then stale and ignored).
    if (res != -ENOENT) timeout_at = 0;
    return;
  }
  if (user_data == kTimeoutBase + (timeout_seq & kTimeoutSeqMask)) timeout_at = 0;
}

bool Reactor::Impl::ready_to_sleep() {
  // Clear our "wake in flight" flag with a read-modify-write, then look at the
  // inboxes once more. A peer whose exchange(true) we read from pushed before
  // it (release → acquire), so the look below sees its task; a peer that
  // pushes after our exchange reads false and sends a MSG_RING that wakes us.
  // Clearing only here, right before sleeping, matters: a wake CQE reaped
  // earlier in this turn must not leave the flag set with no wake in flight.
  notified.exchange(false, std::memory_order_acq_rel);
  if (external_pending.load(std::memory_order_acquire)) return false;
  for (unsigned from = 0; from < runtime.cores(); ++from) {
    if (from != core && runtime.impl_->box(from, core).size_approx() > 0) return false;
  }
  return true;
}

void Reactor::Impl::turn(bool may_sleep) {
  read_clocks();
  bool more = drain_mailboxes();
  more |= drain_external();
  more |= reap_completions();
  more |= fire_timers();
  more |= run_deferred();
  for (auto& hook : turn_hooks) hook();
  more |= !deferred.empty();
  send_wakeups();
  if (!more && may_sleep) more = !ready_to_sleep();
  wait(more || !may_sleep);
}

void Reactor::Impl::run() {
  while (!stop_requested.load(std::memory_order_acquire)) turn(true);
  for (auto& hook : stop_hooks) hook();
  // Rule 4 at exit: let every cancelled operation complete before the handlers
  // and their buffers are freed and the ring goes away.
  const std::int64_t deadline = clock_us(CLOCK_MONOTONIC) + kStopDrainUs;
  while (io_count > 0 && clock_us(CLOCK_MONOTONIC) < deadline) {
    turn(false);
    if (io_count == 0) break;
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec ts{0, 10'000'000};
    io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &ts, nullptr);
  }
  exit_ring();
}

// ---- Reactor public API ----

Reactor::Reactor(Runtime& runtime, unsigned core) : impl_(std::make_unique<Impl>(runtime, core)) {
  impl_->wake_marked.assign(runtime.cores(), 0);
}

Reactor::~Reactor() = default;

unsigned Reactor::core() const { return impl_->core; }
Runtime& Reactor::runtime() const { return impl_->runtime; }
std::int64_t Reactor::now_us() const { return impl_->now_us; }
std::int64_t Reactor::wall_us() const { return impl_->wall_us; }

Reactor::TimerId Reactor::add_timer(std::int64_t delay_us, Task task) {
  if (delay_us < 0) delay_us = 0;
  return impl_->timers.add(impl_->now_us + delay_us, std::move(task));
}

void Reactor::cancel_timer(TimerId id) { impl_->timers.cancel(id); }

void Reactor::defer(Task task) { impl_->deferred.push_back(std::move(task)); }

Reactor::IoSlot Reactor::register_io(IoHandler& handler) {
  std::uint32_t slot;
  if (!impl_->io_free.empty()) {
    slot = impl_->io_free.back();
    impl_->io_free.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(impl_->io.size());
    impl_->io.emplace_back();
  }
  impl_->io[slot].handler = &handler;
  ++impl_->io_count;
  return (std::uint64_t{impl_->io[slot].generation} << 32) | slot;
}

void Reactor::unregister_io(IoSlot slot_id) {
  const auto slot = static_cast<std::uint32_t>(slot_id & kSlotMask);
  const auto generation = static_cast<std::uint32_t>(slot_id >> 32);
  if (slot >= impl_->io.size()) return;
  Impl::IoEntry& entry = impl_->io[slot];
  if (entry.handler == nullptr || entry.generation != generation) return;
  entry.handler = nullptr;
  entry.generation = (entry.generation + 1) & kGenerationMask;
  if (entry.generation == 0) entry.generation = 1;
  impl_->io_free.push_back(slot);
  --impl_->io_count;
}

io_uring_sqe* Reactor::prepare(IoSlot slot_id, std::uint8_t op) {
  io_uring_sqe* sqe = impl_->get_sqe();
  const auto slot = static_cast<std::uint32_t>(slot_id & kSlotMask);
  const auto generation = static_cast<std::uint32_t>(slot_id >> 32);
  // The prep_* helper the caller runs next sets fields but not user_data; it
  // does clear sqe->flags, so callers set flags after prep.
  io_uring_sqe_set_data64(sqe, encode(slot, generation, op));
  return sqe;
}

io_uring_sqe* Reactor::prepare_untracked() {
  io_uring_sqe* sqe = impl_->get_sqe();
  io_uring_sqe_set_data64(sqe, kUntrackedUserData);
  return sqe;
}

BufferRing* Reactor::recv_buffers() { return impl_->recv_buffers.get(); }

void Reactor::add_turn_hook(std::function<void()> hook) {
  impl_->turn_hooks.push_back(std::move(hook));
}

void Reactor::add_stop_hook(std::function<void()> hook) {
  impl_->stop_hooks.push_back(std::move(hook));
}

std::size_t Reactor::io_registered() const { return impl_->io_count; }

unsigned Reactor::ring_setup_flags() const { return impl_->ring_flags; }

std::string ring_setup_names(unsigned flags) {
  static constexpr std::pair<unsigned, const char*> kNames[] = {
      {IORING_SETUP_SINGLE_ISSUER, "SINGLE_ISSUER"},
      {IORING_SETUP_DEFER_TASKRUN, "DEFER_TASKRUN"},
      {IORING_SETUP_COOP_TASKRUN, "COOP_TASKRUN"},
      {IORING_SETUP_SUBMIT_ALL, "SUBMIT_ALL"},
      {IORING_SETUP_CQSIZE, "CQSIZE"},
  };
  std::string out;
  for (const auto& [bit, name] : kNames) {
    if ((flags & bit) == 0) continue;
    if (!out.empty()) out += '|';
    out += name;
  }
  return out.empty() ? "none" : out;
}

}  // namespace ic::runtime
