// The per-core event loop (docs/architecture.md rules 1, 2, 4), on the
// backend the runtime chose (backend_uring.cc, backend_epoll.cc).

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

// How long the stop drain waits for in-flight I/O to complete after the stop
// hooks cancelled it.
constexpr std::int64_t kStopDrainUs = 2'000'000;

std::int64_t clock_us(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000 + ts.tv_nsec / 1000;
}

}  // namespace

Reactor::Impl::Impl(Runtime& rt, unsigned core_index) : runtime(rt), core(core_index) {
  event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  now_us = clock_us(CLOCK_MONOTONIC);
  wall_us = clock_us(CLOCK_REALTIME);
}

Reactor::Impl::~Impl() {
  uring.exit();
  epoll.exit();
  if (event_fd >= 0) ::close(event_fd);
}

std::string Reactor::Impl::init_backend(Backend kind) {
  backend = kind;
  return kind == Backend::kIoUring ? uring.init() : epoll.init();
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

template <typename B>
void Reactor::Impl::send_wakeups(B& b) {
  for (unsigned target : wake_targets) {
    wake_marked[target] = 0;
    Reactor::Impl& peer = *runtime.reactor(target).impl_;
    if (peer.notified.exchange(true, std::memory_order_acq_rel)) continue;
    if constexpr (std::is_same_v<B, UringBackend>) {
      b.wake(target, peer.uring);
    } else {
      b.wake(target, peer.epoll);
    }
  }
  wake_targets.clear();
}

bool Reactor::Impl::ready_to_sleep() {
  // Clear our "wake in flight" flag with a read-modify-write, then look at the
  // inboxes once more. A peer whose exchange(true) we read from pushed before
  // it (release → acquire), so the look below sees its task; a peer that
  // pushes after our exchange reads false and sends a wake that wakes us.
  // Clearing only here, right before sleeping, matters: a wake reaped
  // earlier in this turn must not leave the flag set with no wake in flight.
  notified.exchange(false, std::memory_order_acq_rel);
  if (external_pending.load(std::memory_order_acquire)) return false;
  for (unsigned from = 0; from < runtime.cores(); ++from) {
    if (from != core && runtime.impl_->box(from, core).size_approx() > 0) return false;
  }
  return true;
}

template <typename B>
void Reactor::Impl::turn(B& b, bool may_sleep) {
  read_clocks();
  bool more = drain_mailboxes();
  more |= drain_external();
  more |= b.reap();
  more |= fire_timers();
  more |= run_deferred();
  for (auto& hook : turn_hooks) hook();
  more |= !deferred.empty();
  send_wakeups(b);
  if (!more && may_sleep) more = !ready_to_sleep();
  const bool poll_only = more || !may_sleep || stop_requested.load(std::memory_order_acquire);
  b.wait(poll_only, poll_only ? std::nullopt : timers.next_deadline());
}

template <typename B>
void Reactor::Impl::run_on(B& b) {
  while (!stop_requested.load(std::memory_order_acquire)) turn(b, true);
  for (auto& hook : stop_hooks) hook();
  // Rule 4 at exit: let every cancelled operation complete before the handlers
  // and their buffers are freed and the backend goes away.
  const std::int64_t deadline = clock_us(CLOCK_MONOTONIC) + kStopDrainUs;
  while (io_count > 0 && clock_us(CLOCK_MONOTONIC) < deadline) {
    turn(b, false);
    if (io_count == 0) break;
    b.drain_wait();
  }
  b.exit();
}

void Reactor::Impl::run() {
  if (backend == Backend::kIoUring) {
    run_on(uring);
  } else {
    run_on(epoll);
  }
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

void Reactor::accept(IoSlot slot, std::uint8_t op, int fd) {
  if (impl_->backend == Backend::kIoUring) {
    impl_->uring.accept(encode_key(slot, op), fd);
  } else {
    impl_->epoll.accept(encode_key(slot, op), fd);
  }
}

void Reactor::recv(IoSlot slot, std::uint8_t op, int fd, std::span<std::byte> own) {
  if (impl_->backend == Backend::kIoUring) {
    impl_->uring.recv(encode_key(slot, op), fd, own);
  } else {
    impl_->epoll.recv(encode_key(slot, op), fd, own);
  }
}

void Reactor::send(IoSlot slot, std::uint8_t op, int fd, std::span<const std::byte> bytes) {
  if (impl_->backend == Backend::kIoUring) {
    impl_->uring.send(encode_key(slot, op), fd, bytes);
  } else {
    impl_->epoll.send(encode_key(slot, op), fd, bytes);
  }
}

void Reactor::cancel(int fd) {
  if (impl_->backend == Backend::kIoUring) {
    impl_->uring.cancel(fd);
  } else {
    impl_->epoll.cancel(fd);
  }
}

bool Reactor::shared_recv_buffers() const {
  return impl_->backend == Backend::kIoUring ? impl_->uring.shared_recv_buffers()
                                             : impl_->epoll.shared_recv_buffers();
}

std::span<const std::byte> Reactor::received(std::uint32_t flags, std::int32_t res) const {
  return impl_->backend == Backend::kIoUring ? impl_->uring.received(flags, res)
                                             : impl_->epoll.received(flags, res);
}

void Reactor::release_received(std::uint32_t flags) {
  if (impl_->backend == Backend::kIoUring) impl_->uring.release_received(flags);
}

void Reactor::add_turn_hook(std::function<void()> hook) {
  impl_->turn_hooks.push_back(std::move(hook));
}

void Reactor::add_stop_hook(std::function<void()> hook) {
  impl_->stop_hooks.push_back(std::move(hook));
}

std::size_t Reactor::io_registered() const { return impl_->io_count; }

unsigned Reactor::ring_setup_flags() const { return impl_->uring.setup_flags(); }

Backend Reactor::backend() const { return impl_->backend; }

std::string_view backend_name(Backend backend) {
  return backend == Backend::kIoUring ? "io_uring" : "epoll";
}

std::optional<BackendChoice> parse_backend_choice(std::string_view text) {
  if (text == "auto") return BackendChoice::kAuto;
  if (text == "io_uring") return BackendChoice::kIoUring;
  if (text == "epoll") return BackendChoice::kEpoll;
  return std::nullopt;
}

}  // namespace ic::runtime
