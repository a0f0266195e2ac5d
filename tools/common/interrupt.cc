#include "common/interrupt.hh"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

namespace ic::tools {
namespace {

std::atomic<int> g_signals{0};

extern "C" void on_signal(int) {
  if (g_signals.fetch_add(1) >= 1) _exit(kInterruptedExit);
}

const char* g_exit_message = "";

extern "C" void on_signal_exit(int) {
  const char* m = g_exit_message;
  std::size_t n = 0;
  while (m[n] != '\0') ++n;
  [[maybe_unused]] auto written = write(STDERR_FILENO, m, n);
  _exit(kInterruptedExit);
}

}  // namespace

void install_exit_on_interrupt(const char* message) {
  g_exit_message = message;
  struct sigaction action {};
  action.sa_handler = on_signal_exit;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

void install_interrupt_handler() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool interrupted() { return g_signals.load(std::memory_order_relaxed) > 0; }

bool sleep_unless_interrupted(long long micros) {
  // Short slices keep Ctrl-C responsive without a self-pipe.
  constexpr long long kSliceUs = 50'000;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
  while (!interrupted()) {
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(std::min<long long>(left, kSliceUs)));
  }
  return false;
}

}  // namespace ic::tools
