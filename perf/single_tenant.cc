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
// BM_SpreadLookup: the same tenant spread over K cores (--spread-tenants,
// docs/placement.md): each core answers its own callers from its read copy
// (core 0 the owner's shard, cores 1..K−1 copies loaded as the server's
// resync does), no mailbox. Reported: lookup CPU per call on each answering
// core and calls/s of the K cores together.
//
// BM_SpreadIngest: what being the sequencer costs the owner: owner CPU per
// ingest (a 16-block chain of the tenant) without placement, and with K−1
// copies to forward to (the copies' own CPU is reported apart).
//
// Run: <build>/perf/single_tenant (reactors are not pinned: on a 2-CPU machine
// the senders share a CPU; the CPU times stay per thread).

#include <benchmark/benchmark.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "index_world.hh"
#include "metrics/registry.hh"
#include "placement/copy_export.hh"
#include "placement/spread.hh"
#include "runtime/runtime.hh"
#include "runtime/submit.hh"
#include "sharding/sharded_index.hh"

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

// One lookup per probe of `w`: its 64-block chain, or with `exact` the exact
// key of one of its blocks.
std::vector<pb::LookupRouteRequest> lookup_requests(World& w, bool exact) {
  std::vector<pb::LookupRouteRequest> requests;
  for (std::size_t c = 0; c < w.probes.size(); ++c) {
    requests.push_back(exact ? exact_request(w, c) : chain_request(w, c));
  }
  return requests;
}

// One run: shared by the reactors; each field is written by one core.
struct Drive {
  Runtime* runtime = nullptr;
  ic::sharding::ShardedIndex* index = nullptr;
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
        ic::sharding::wire::lookup_route(*shard, r, ctx, &response);
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
  const std::vector<pb::LookupRouteRequest> requests = lookup_requests(w, state.range(2) == 1);
  double owner_ns = 0, sender_ns = 0, wall_rate = 0;
  for (auto _ : state) {
    Runtime runtime(Runtime::Options{.cores = senders + 1, .pin_threads = false});
    // Only the owner's shard is read; the others stay empty.
    std::vector<std::unique_ptr<Shard>> idle;
    std::vector<Shard*> shards{w.shard.get()};
    for (unsigned c = 1; c <= senders; ++c) {
      idle.push_back(std::make_unique<Shard>(IndexConfig{}, nullptr));
      shards.push_back(idle.back().get());
    }
    ic::sharding::ShardedIndex index(runtime, shards, w.clock);
    Drive d;
    d.runtime = &runtime;
    d.index = &index;
    d.requests = &requests;
    d.ctx.clock = &w.clock;
    d.window = static_cast<int>(state.range(1));
    d.senders_left = static_cast<int>(senders);
    std::vector<Sender> states(senders + 1);
    d.start = std::chrono::steady_clock::now();
    ic::metrics::Registry metrics(senders + 1);  // reactor threads count into a bound registry
    runtime.start([&](unsigned core) {
      metrics.bind_current_thread(core);
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
    ->ArgsProduct({{1, 3}, {64}, {0, 1}})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

// Copies of tenant-a for cores 1..n (built once: loading 0.5M entries takes
// seconds), with the copies' configuration (an unreachable cap).
Shard& spread_copy(unsigned core) {
  static std::vector<std::unique_ptr<Shard>> copies;
  static std::vector<std::string> chunks = ic::placement::export_tenant(*world().shard, "tenant-a");
  while (copies.size() < core) {
    IndexConfig cfg;
    cfg.max_entries = INT64_MAX / 4;
    copies.push_back(std::make_unique<Shard>(cfg, nullptr));
    ic::placement::load_chunks(*copies.back(), chunks);
  }
  return *copies[core - 1];
}

// One BM_SpreadLookup run, shared by the K answering cores.
struct SpreadRun {
  Runtime* runtime = nullptr;
  std::atomic<int> left{0};
  std::atomic<std::int64_t> cpu_ns{0};
  std::atomic<int> wrong{0};
  std::chrono::steady_clock::time_point start, end;
};

// Core `core`'s callers: kCallsPerSender lookups answered here, into one
// reusable response (service/index_methods.cc answer_here).
void answer_locally(SpreadRun* run, Shard& shard, const std::vector<pb::LookupRouteRequest>& reqs,
                    ManualClock& clock, unsigned core) {
  const std::int64_t cpu0 = thread_cpu_ns();
  ic::index::LookupContext ctx;
  ctx.clock = &clock;
  pb::LookupRouteResponse response;
  for (int i = 0; i < kCallsPerSender; ++i) {
    ic::sharding::wire::lookup_route(shard, reqs[(core * 97 + i) % reqs.size()], ctx, &response);
    if (response.reason_code().empty()) ++run->wrong;
  }
  run->cpu_ns += thread_cpu_ns() - cpu0;
  if (--run->left == 0) {
    run->end = std::chrono::steady_clock::now();
    run->runtime->stop();
  }
}

// range(0): cores answering (K); range(1): 0 = 64-block chain lookups, 1 = exact.
void BM_SpreadLookup(benchmark::State& state) {
  World& w = world();
  const auto k = static_cast<unsigned>(state.range(0));
  const std::vector<pb::LookupRouteRequest> requests = lookup_requests(w, state.range(1) == 1);
  for (unsigned core = 1; core < k; ++core) spread_copy(core);
  double cpu_ns = 0, rate = 0;
  for (auto _ : state) {
    Runtime runtime(Runtime::Options{.cores = k, .pin_threads = false});
    SpreadRun run;
    run.runtime = &runtime;
    run.left = static_cast<int>(k);
    run.start = std::chrono::steady_clock::now();
    ic::metrics::Registry metrics(k);
    runtime.start([&](unsigned core) {
      metrics.bind_current_thread(core);
      Shard& shard = core == 0 ? *w.shard : spread_copy(core);
      answer_locally(&run, shard, requests, w.clock, core);
    });
    runtime.join();
    if (run.wrong > 0) {
      state.SkipWithError("an answer had no reason code");
      return;
    }
    const double calls = static_cast<double>(kCallsPerSender) * k;
    const double wall_s = std::chrono::duration<double>(run.end - run.start).count();
    state.SetIterationTime(wall_s);
    cpu_ns += static_cast<double>(run.cpu_ns.load()) / calls;
    rate += calls / wall_s;
  }
  const double runs = static_cast<double>(state.iterations());
  state.counters["cpu_ns_per_call"] = cpu_ns / runs;
  state.counters["ceiling_calls_s"] = k * 1e9 / (cpu_ns / runs);
  state.counters["calls_s_here"] = rate / runs;
}
BENCHMARK(BM_SpreadLookup)
    ->ArgNames({"cores", "exact"})
    ->ArgsProduct({{1, 2}, {0, 1}})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

// One BM_SpreadIngest run: the owner core ingests `updates` in slices of
// kIngestSlice per loop turn (so each turn ends with its forwards sent).
struct IngestRun {
  Runtime* runtime = nullptr;
  ic::sharding::ShardedIndex* index = nullptr;
  const std::vector<pb::CacheStateUpdate>* updates = nullptr;
  unsigned owner = 0;
  std::size_t next = 0;
  std::int64_t cpu_ns = 0;
};
constexpr std::size_t kIngestSlice = 64;

void ingest_slice(IngestRun* run) {
  const std::int64_t cpu0 = thread_cpu_ns();
  const std::size_t end = std::min(run->next + kIngestSlice, run->updates->size());
  for (; run->next < end; ++run->next) {
    run->index->apply_ingest(run->owner, (*run->updates)[run->next], kNow);
  }
  run->cpu_ns += thread_cpu_ns() - cpu0;
  if (run->next == run->updates->size()) {
    run->runtime->stop();
  } else if (!run->runtime->post(run->owner, [run] { ingest_slice(run); })) {
    run->runtime->stop();
  }
}

// range(0): cores (the owner and range(0) − 1 copies); range(1): 1 = spread, 0 = not.
void BM_SpreadIngest(benchmark::State& state) {
  const auto cores = static_cast<unsigned>(state.range(0));
  const bool spread = state.range(1) == 1;
  std::mt19937_64 rng(7);
  std::vector<pb::CacheStateUpdate> updates;
  for (int i = 0; i < 20'000; ++i) {
    std::vector<std::uint64_t> blocks(16);
    for (auto& b : blocks) b = rng();
    updates.push_back(chain_update("tenant-s", name("replica-", i % 8), blocks, kNow));
  }
  double cpu_ns = 0;
  for (auto _ : state) {
    Runtime runtime(Runtime::Options{.cores = cores, .pin_threads = false});
    ic::index::IndexGlobals globals;
    std::vector<std::unique_ptr<Shard>> shards;
    std::vector<Shard*> pointers;
    for (unsigned c = 0; c < cores; ++c) {
      shards.push_back(std::make_unique<Shard>(IndexConfig{}, &globals));
      pointers.push_back(shards.back().get());
    }
    ManualClock clock;
    clock.wall = kNow;
    ic::sharding::ShardedIndex index(runtime, pointers, clock);
    std::unique_ptr<ic::placement::SpreadPlacement> placement;
    if (spread) {
      placement = std::make_unique<ic::placement::SpreadPlacement>(
          runtime, pointers, IndexConfig{}, &globals, nullptr,
          ic::placement::SpreadOptions{.tenants = {"tenant-s"}});
      index.set_placement(placement.get());
    }
    IngestRun run{&runtime, &index, &updates, index.owner("tenant-s")};
    ic::metrics::Registry metrics(cores);
    runtime.start([&](unsigned core) {
      metrics.bind_current_thread(core);
      if (core == run.owner) ingest_slice(&run);
    });
    runtime.join();
    cpu_ns += static_cast<double>(run.cpu_ns) / static_cast<double>(updates.size());
  }
  state.counters["owner_cpu_ns_per_ingest"] = cpu_ns / static_cast<double>(state.iterations());
}
BENCHMARK(BM_SpreadIngest)
    ->ArgNames({"cores", "spread"})
    ->Args({2, 0})
    ->Args({2, 1})
    ->Args({3, 1})
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
