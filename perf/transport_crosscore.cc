// Transport microbenchmarks, part 3: a cross-core message round trip through
// the runtime's mailboxes (core 0 → core 1 → core 0), the price of serving a
// tenant owned by another core. Each iteration runs kTrips sequential round
// trips, so each one includes waking the idle peer reactor (msg_ring).
// `verb`: 0 = two raw Runtime::post calls, 1 = one runtime::try_submit_to
// (runtime/submit.hh) with its reply. BM_LocalCall: the verb's local fast
// path against a direct call (what a LookupRoute for a tenant this core
// owns pays for going through the verb).
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>

#include "runtime/runtime.hh"
#include "runtime/submit.hh"

namespace {

using ic::runtime::Runtime;

constexpr int kTrips = 20000;

struct PingPong {
  Runtime* runtime = nullptr;
  int left = kTrips;
  std::chrono::steady_clock::time_point start;
  std::atomic<std::int64_t> elapsed_ns{-1};
  std::atomic<int> dropped{0};
  bool verb = false;
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
  if (p->verb) {
    auto refused = ic::runtime::try_submit_to(
        *p->runtime, 1, p, [](PingPong*& q) { return q; }, [](PingPong* q) { ping(q); });
    if (refused) {
      ++p->dropped;
      p->runtime->stop();
    }
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
    Runtime runtime(Runtime::Options{.cores = 2, .pin_threads = state.range(0) == 1});
    PingPong p;
    p.runtime = &runtime;
    p.verb = state.range(1) == 1;
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
BENCHMARK(BM_CrossCoreRoundTrip)
    ->ArgNames({"pinned", "verb"})
    ->ArgsProduct({{1, 0}, {0, 1}})
    ->UseManualTime()
    ->Iterations(5);

constexpr int kLocalCalls = 1'000'000;

// A stand-in for the shard's work: cheap enough that the call's own cost shows.
std::uint64_t work(std::uint64_t& x) { return x = x * 6364136223846793005u + 1442695040888963407u; }

// range(0): 0 = direct call, 1 = try_submit_to to the calling core.
void BM_LocalCall(benchmark::State& state) {
  for (auto _ : state) {
    Runtime runtime(Runtime::Options{.cores = 1, .pin_threads = false});
    std::int64_t elapsed_ns = 0;
    const bool verb = state.range(0) == 1;
    // Through the interface, as sharding/sharded_index.hh calls it.
    ic::runtime::Cores& cores = runtime;
    runtime.start([&](unsigned) {
      std::uint64_t x = 1;
      std::uint64_t sum = 0;
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < kLocalCalls; ++i) {
        if (verb) {
          auto refused = ic::runtime::try_submit_to(
              cores, 0, x, [](std::uint64_t& v) { return work(v); },
              [&sum](std::uint64_t r) { sum += r; });
          benchmark::DoNotOptimize(refused);
        } else {
          sum += work(x);
        }
        benchmark::DoNotOptimize(sum);
      }
      elapsed_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count();
      runtime.stop();
    });
    runtime.join();
    state.SetIterationTime(static_cast<double>(elapsed_ns) / 1e9);
  }
  state.SetItemsProcessed(state.iterations() * kLocalCalls);
}
BENCHMARK(BM_LocalCall)->ArgName("verb")->Arg(0)->Arg(1)->UseManualTime()->Iterations(5);

}  // namespace

BENCHMARK_MAIN();
