// The single-tenant ceiling (README "Performance against grpc++"): one tenant
// lives on one owner core (docs/index.md "Partitioning"), so every LookupRoute
// of a single-tenant deployment does its index work there. This drives owner
// core 0 from the other reactors' mailboxes exactly as the service does
// (service/index_methods.cc: the request moved through the runtime's
// cross-core verb, wire::lookup_route on the owner, the response moved back),
// each sender keeping `window` calls in flight, on the 1,000,000-entry index
// of perf/index_bench.cc (a different 64-block × 8-replica chain per call,
// or the exact key of one of its blocks).
//
// Reported per call: the owner core's CPU (thread CPU time / calls) and the
// senders' CPU for the verb (building the request, submitting, running the
// reply: the transport's share of a cross-core call). owner_ceiling_calls_s =
// 1e9 / owner_cpu_ns: the calls/s one tenant reaches when its owner core is
// saturated. Divide by the transport's calls/s per core (RenderTemplate's
// ceiling, perf/results/) for the transport cores one owner core feeds.
//
// Run: <build>/perf/single_tenant (reactors are not pinned: on a 2-CPU machine
// the senders share a CPU; the CPU times stay per thread).

#include <benchmark/benchmark.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "index_world.hh"
#include "runtime/runtime.hh"
#include "runtime/submit.hh"
#include "service/sharded_index.hh"

namespace {

using namespace ic::perf;
using ic::runtime::Runtime;

constexpr int kCallsPerSender = 40'000;
constexpr unsigned kOwner = 0;

std::int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

World& world() {
  static World w;
  return w;
}

// One run: shared by the reactors; each field is written by one core.
struct Drive {
  Runtime* runtime = nullptr;
  ic::service::ShardedIndex* index = nullptr;
  const std::vector<pb::LookupRouteRequest>* requests = nullptr;
  ic::index::LookupContext ctx;
  int window = 0;
  std::atomic<int> senders_left{0};
  std::atomic<int> refused{0};
  std::atomic<int> wrong{0};
  std::atomic<std::int64_t> sender_cpu_ns{0};
  std::int64_t owner_cpu_start_ns = 0;
  std::int64_t owner_cpu_ns = 0;
  std::chrono::steady_clock::time_point start, end;
};

// A sender core's state (touched on that core only).
struct Sender {
  Drive* drive;
  unsigned core;
  int sent = 0;
  int done = 0;
  std::size_t next = 0;
  std::int64_t cpu_start_ns = 0;
};

void finish_sender(Sender* s) {
  Drive* d = s->drive;
  d->sender_cpu_ns += thread_cpu_ns() - s->cpu_start_ns;
  if (--d->senders_left != 0) return;
  // The last sender: read the owner's CPU time on the owner, then stop.
  const bool posted = d->runtime->post(kOwner, [d] {
    d->owner_cpu_ns = thread_cpu_ns() - d->owner_cpu_start_ns;
    d->end = std::chrono::steady_clock::now();
    d->runtime->stop();
  });
  if (!posted) d->runtime->stop();
}

// Sends one more call from `s`'s core to the owner; its reply sends the next.
void send(Sender* s) {
  Drive* d = s->drive;
  const auto& reqs = *d->requests;
  pb::LookupRouteRequest req = reqs[(s->core * 97 + s->next++) % reqs.size()];
  ++s->sent;
  // The LookupRoute method's path (service/index_methods.cc): the runtime's
  // verb to the owner's shard, the answer back on this core.
  auto refused = ic::runtime::try_submit_to(
      d->index->cores(), kOwner, std::move(req),
      [shard = &d->index->shard(kOwner), ctx = d->ctx](pb::LookupRouteRequest& r) {
        pb::LookupRouteResponse response;
        ic::service::wire::lookup_route(*shard, r, ctx, &response);
        return response;
      },
      [s](pb::LookupRouteResponse&& response) {
        if (response.reason_code().empty()) ++s->drive->wrong;
        if (s->sent < kCallsPerSender) send(s);
        if (++s->done == kCallsPerSender) finish_sender(s);
      });
  if (refused) {
    ++d->refused;
    d->runtime->stop();
  }
}

// range(0): sender cores; range(1): calls in flight per sender; range(2):
// 0 = 64-block chain lookups, 1 = exact lookups.
void BM_SingleTenantOwner(benchmark::State& state) {
  World& w = world();
  const unsigned senders = static_cast<unsigned>(state.range(0));
  std::vector<pb::LookupRouteRequest> requests;
  for (std::size_t c = 0; c < w.probes.size(); ++c) {
    requests.push_back(state.range(2) == 0 ? chain_request(w, c) : exact_request(w, c));
  }
  double owner_ns = 0, sender_ns = 0, wall_rate = 0;
  for (auto _ : state) {
    Runtime::Options options;
    options.cores = senders + 1;
    options.pin_threads = false;
    Runtime runtime(options);
    // Only the owner's shard is read; the others stay empty.
    std::vector<std::unique_ptr<Shard>> idle;
    std::vector<Shard*> shards{w.shard.get()};
    for (unsigned c = 1; c <= senders; ++c) {
      idle.push_back(std::make_unique<Shard>(IndexConfig{}, nullptr));
      shards.push_back(idle.back().get());
    }
    ic::service::ShardedIndex index(runtime, shards, w.clock);
    Drive d;
    d.runtime = &runtime;
    d.index = &index;
    d.requests = &requests;
    d.ctx.clock = &w.clock;
    d.window = static_cast<int>(state.range(1));
    d.senders_left = static_cast<int>(senders);
    std::vector<Sender> states(senders + 1);
    d.start = std::chrono::steady_clock::now();
    runtime.start([&](unsigned core) {
      if (core == kOwner) {
        d.owner_cpu_start_ns = thread_cpu_ns();
        return;
      }
      Sender* s = &states[core];
      *s = Sender{&d, core};
      s->cpu_start_ns = thread_cpu_ns();
      for (int i = 0; i < d.window && s->sent < kCallsPerSender; ++i) send(s);
    });
    runtime.join();
    if (d.refused > 0 || d.wrong > 0 || d.owner_cpu_ns == 0) {
      state.SkipWithError("a call was refused, unanswered or the run did not finish");
      return;
    }
    const double calls = static_cast<double>(kCallsPerSender) * senders;
    const double wall_s = std::chrono::duration<double>(d.end - d.start).count();
    state.SetIterationTime(wall_s);
    owner_ns += static_cast<double>(d.owner_cpu_ns) / calls;
    sender_ns += static_cast<double>(d.sender_cpu_ns.load()) / calls;
    wall_rate += calls / wall_s;
  }
  const double runs = static_cast<double>(state.iterations());
  state.counters["owner_cpu_ns_per_call"] = owner_ns / runs;
  state.counters["sender_cpu_ns_per_call"] = sender_ns / runs;
  state.counters["owner_ceiling_calls_s"] = 1e9 / (owner_ns / runs);
  state.counters["calls_s_here"] = wall_rate / runs;
}
BENCHMARK(BM_SingleTenantOwner)
    ->ArgNames({"senders", "window", "exact"})
    ->Args({1, 64, 0})
    ->Args({3, 64, 0})
    ->Args({1, 64, 1})
    ->Args({3, 64, 1})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
