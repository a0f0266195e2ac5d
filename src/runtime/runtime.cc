// Runtime: the reactor threads and the mailbox matrix between them.

#include <pthread.h>
#include <sched.h>

#include <string>

#include "base/check.hh"
#include "runtime/reactor_impl.hh"

namespace ic::runtime {

namespace {

thread_local Reactor* tls_reactor = nullptr;

// CPUs this process may run on, in order (honours taskset/cgroup limits).
std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  if (cpus.empty()) {
    const unsigned n = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned i = 0; i < n; ++i) cpus.push_back(static_cast<int>(i));
  }
  return cpus;
}

}  // namespace

unsigned current_core() {
  // Off a reactor there is no core: answering 0 would read or write core 0's
  // per-core state from a foreign thread.
  IC_CHECK(tls_reactor != nullptr, "runtime::current_core() off a reactor thread");
  return tls_reactor->core();
}

bool on_reactor_thread() { return tls_reactor != nullptr; }

Reactor& current_reactor() { return *tls_reactor; }

Runtime::Impl::Impl(Options opts) : options(opts), cpus(allowed_cpus()) {
  n = options.cores != 0 ? options.cores : static_cast<unsigned>(cpus.size());
  mailboxes.resize(std::size_t{n} * n);
  for (unsigned from = 0; from < n; ++from)
    for (unsigned to = 0; to < n; ++to)
      if (from != to)
        mailboxes[from * n + to] = std::make_unique<SpscRing<Task>>(options.mailbox_depth);
}

void Runtime::Impl::thread_main(unsigned core, const std::function<void(unsigned)>& on_start) {
  Reactor& reactor = *reactors[core];
  tls_reactor = &reactor;
  if (options.pin_threads) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpus[core % cpus.size()], &set);
    // Best effort: a container may forbid it; the runtime works unpinned.
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  }
  if (std::string error = reactor.impl_->init_backend(backend); !error.empty()) {
    std::lock_guard lock(setup_mu);
    if (setup_error.empty()) setup_error = "core " + std::to_string(core) + ": " + error;
    setup_failed.store(true, std::memory_order_release);
  }
  reactor.impl_->read_clocks();  // timers added by on_start count from now
  // Every ring must exist before anyone sends a MSG_RING wake to it, and no
  // core serves unless every one could set up its backend.
  backends_ready->arrive_and_wait();
  if (!setup_failed.load(std::memory_order_acquire)) {
    if (on_start) on_start(core);
    reactor.impl_->run();
  } else {
    reactor.impl_->uring.exit();
    reactor.impl_->epoll.exit();
  }
  tls_reactor = nullptr;
}

std::string Runtime::Impl::choose_backend() {
  switch (options.backend) {
    case BackendChoice::kEpoll:
      backend = Backend::kEpoll;
      return {};
    case BackendChoice::kIoUring:
      backend = Backend::kIoUring;
      if (const int rc = probe_io_uring(); rc < 0) return io_uring_refusal(rc);
      return {};
    case BackendChoice::kAuto:
      break;
  }
  backend = Backend::kIoUring;
  if (const int rc = probe_io_uring(); rc < 0) {
    backend = Backend::kEpoll;
    fallback_reason = io_uring_refusal(rc);
  }
  return {};
}

Runtime::Runtime(Options options) : impl_(std::make_unique<Impl>(options)) {
  impl_->reactors.reserve(impl_->n);
  for (unsigned core = 0; core < impl_->n; ++core)
    impl_->reactors.emplace_back(new Reactor(*this, core));
}

Runtime::~Runtime() {
  stop();
  join();
}

unsigned Runtime::cores() const { return impl_->n; }

Reactor& Runtime::reactor(unsigned core) { return *impl_->reactors[core]; }

bool Runtime::post(unsigned core, Task task) {
  Reactor* self = tls_reactor;
  if (self != nullptr && &self->runtime() == this && self->core() == core) {
    self->defer(std::move(task));
    return true;
  }
  return try_push(core, task);
}

unsigned Runtime::current_core() const {
  // A thread that is not one of our reactors is no core: submits from it are
  // never "local" (they go through the injection queue instead).
  Reactor* self = tls_reactor;
  return self != nullptr && &self->runtime() == this ? self->core() : impl_->n;
}

bool Runtime::try_push(unsigned core, Task& task) {
  Reactor* self = tls_reactor;
  if (self == nullptr || &self->runtime() != this) {
    impl_->reactors[core]->impl_->post_external(std::move(task));
    return true;
  }
  if (!impl_->box(self->core(), core).try_push(task)) return false;
  self->impl_->note_wake(core);
  return true;
}

Timers& Runtime::timers() { return *tls_reactor; }

void Runtime::defer(Task task) { tls_reactor->defer(std::move(task)); }

std::uint64_t Runtime::mailbox_depth(unsigned from, unsigned to) const {
  if (from == to || from >= impl_->n || to >= impl_->n) return 0;
  return impl_->box(from, to).size_approx();
}

std::string Runtime::start(std::function<void(unsigned core)> on_start) {
  if (std::string error = impl_->choose_backend(); !error.empty()) return error;
  // The reactors and this thread: start() returns once every backend is set up.
  impl_->backends_ready = std::make_unique<std::latch>(impl_->n + 1);
  impl_->threads.reserve(impl_->n);
  for (unsigned core = 0; core < impl_->n; ++core)
    impl_->threads.emplace_back([this, core, on_start] { impl_->thread_main(core, on_start); });
  impl_->backends_ready->arrive_and_wait();
  if (!impl_->setup_failed.load(std::memory_order_acquire)) return {};
  join();
  std::lock_guard lock(impl_->setup_mu);
  return impl_->setup_error;
}

Backend Runtime::backend() const { return impl_->backend; }

const std::string& Runtime::fallback_reason() const { return impl_->fallback_reason; }

void Runtime::stop() {
  for (auto& r : impl_->reactors) r->impl_->request_stop();
}

void Runtime::join() {
  for (auto& t : impl_->threads)
    if (t.joinable()) t.join();
  impl_->threads.clear();
}

}  // namespace ic::runtime
