// Transport microbenchmarks, part 3: a cross-core message round trip through
// the runtime's mailboxes (core 0 → core 1 → core 0), the price of serving a
// tenant owned by another core. Each iteration runs kTrips sequential round
// trips, so each one includes waking the idle peer reactor (msg_ring).
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>

#include "runtime/runtime.hh"

namespace {

using ic::runtime::Runtime;

constexpr int kTrips = 20000;

struct PingPong {
  Runtime* runtime = nullptr;
  int left = kTrips;
  std::chrono::steady_clock::time_point start;
  std::atomic<std::int64_t> elapsed_ns{-1};
  std::atomic<int> dropped{0};
};

// Runs on core 0: one more round trip, or stop when done.
void ping(PingPong* p) {
  if (p->left-- == 0) {
    p->elapsed_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - p->start)
                        .count();
    p->runtime->stop();
    return;
  }
  const bool posted = p->runtime->post(1, [p] {
    if (!p->runtime->post(0, [p] { ping(p); })) {
      ++p->dropped;
      p->runtime->stop();
    }
  });
  if (!posted) {
    ++p->dropped;
    p->runtime->stop();
  }
}

// range(0) = 1: reactors pinned to CPUs 0 and 1 (the server's setup).
void BM_CrossCoreRoundTrip(benchmark::State& state) {
  for (auto _ : state) {
    Runtime::Options options;
    options.cores = 2;
    options.pin_threads = state.range(0) == 1;
    Runtime runtime(options);
    PingPong p;
    p.runtime = &runtime;
    runtime.start([&p](unsigned core) {
      if (core != 0) return;
      p.start = std::chrono::steady_clock::now();
      ping(&p);
    });
    runtime.join();
    if (p.dropped > 0 || p.elapsed_ns < 0) {
      state.SkipWithError("a mailbox refused a post");
      return;
    }
    state.SetIterationTime(static_cast<double>(p.elapsed_ns.load()) / 1e9);
  }
  state.SetItemsProcessed(state.iterations() * kTrips);
}
BENCHMARK(BM_CrossCoreRoundTrip)->ArgName("pinned")->Arg(1)->Arg(0)->UseManualTime()->Iterations(5);

}  // namespace

BENCHMARK_MAIN();
