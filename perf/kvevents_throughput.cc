// inferencecache-kvevents throughput: a local vLLM-like publisher → the adapter pinned to one CPU
// → the real server (pinned to another). Counts block events (blocks named by BlockStored plus
// BlockRemoved) per second of the adapter's wall time, per second of its CPU time and per second
// of the server's CPU time (its ingest: one update per batch window, one PublishEvent per evicted
// prefix), the adapter's peak RSS, and checks that nothing was dropped and that the server's index
// holds exactly what the engine holds at the end (its ingest kept up). Target (docs/kvevents.md): ≥
// 200,000 block events/s on one core.
//
//   kvevents_throughput [--batches N] [--events-per-batch E] [--blocks-per-event B]
//                       [--live-events L] [--adapter-cpu C]
// Needs IC_SERVER_BINARY and IC_KVEVENTS_BINARY (meson's benchmark() sets both).
#include <sched.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "e2e.hh"

namespace {

using namespace ic::tools::kvevents;
using namespace ic::tools::kvevents::test;
using Clock = std::chrono::steady_clock;

// utime + stime of `pid` in seconds (all threads).
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(all.substr(all.rfind(')') + 2));
  std::string f;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(f);
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

long peak_rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// Pre-encoded batches (the publisher must not be the bottleneck): `batches` × `events_per_batch`
// BlockStored of `blocks_per_event` fresh blocks; once more than `live_events` stored events are
// live, each store also removes the oldest (an LRU engine at capacity).
struct Workload {
  std::vector<std::string> payloads;
  std::uint64_t block_events = 0;  // blocks named by stores and removals
  std::uint64_t live_blocks = 0;   // blocks the engine holds at the end
};

Workload make_workload(int batches, int events_per_batch, int blocks_per_event, int live_events) {
  Workload w;
  std::uint64_t next_hash = 1;
  std::vector<std::vector<std::uint64_t>> live;  // hashes of each stored event, oldest first
  std::size_t live_head = 0;
  std::uint32_t token = 0;
  for (int b = 0; b < batches; ++b) {
    Batch batch;
    batch.ts = 1.0;
    batch.dp_rank = 0;
    for (int e = 0; e < events_per_batch; ++e) {
      BlockStored s;
      s.block_size = 16;
      s.medium = "GPU";
      for (int k = 0; k < blocks_per_event; ++k) {
        s.block_hashes.push_back(next_hash++);
        for (int t = 0; t < 16; ++t) s.token_ids.push_back(token++);
      }
      w.block_events += s.block_hashes.size();
      live.push_back(s.block_hashes);
      batch.events.push_back(std::move(s));
      if (live.size() - live_head > static_cast<std::size_t>(live_events)) {
        BlockRemoved r;
        r.medium = "GPU";
        r.block_hashes = live[live_head++];
        w.block_events += r.block_hashes.size();
        batch.events.push_back(std::move(r));
      }
    }
    w.payloads.push_back(encode_batch(batch, Encoding::array));
  }
  w.live_blocks = static_cast<std::uint64_t>(live.size() - live_head) *
                  static_cast<std::uint64_t>(blocks_per_event);
  return w;
}

// Prints the figures; true when nothing was dropped and the adapter tracks exactly the live blocks
// (+ the barrier's marker).
bool report(const AdapterProcess& adapter, const Workload& w, int batches, int cpu, double wall,
            double decode_wall, double cpu_used, double server_cpu_used) {
  auto metric = [&](const char* name, const char* labels = "") {
    return adapter.metric(std::string("inferencecache_kvevents_") + name, labels).value_or(-1);
  };
  const double n = static_cast<double>(w.block_events);
  std::printf("batches %d, block events %llu (stored + removed), live blocks at the end %llu\n",
              batches, static_cast<unsigned long long>(w.block_events),
              static_cast<unsigned long long>(w.live_blocks));
  std::printf(
      "publish → all applied by the server: %.3f s = %.0f block events/s "
      "(all batches decoded after %.3f s = %.0f/s)\n",
      wall, n / wall, decode_wall, n / decode_wall);
  std::printf("adapter CPU %.3f s (pinned to CPU %d) = %.0f block events per CPU-second\n",
              cpu_used, cpu, n / cpu_used);
  std::printf("server CPU %.3f s = %.0f block events per server CPU-second\n", server_cpu_used,
              n / server_cpu_used);
  std::printf(
      "adapter peak RSS %ld KiB; tracked blocks %.0f; seq gaps %.0f; superseded %.0f; "
      "send errors %.0f; updates %.0f; evictions %.0f\n",
      peak_rss_kib(adapter.pid()), metric("tracked_blocks"), metric("seq_gaps_total"),
      metric("superseded_entries_total"), metric("send_errors_total"), metric("updates_sent_total"),
      metric("server_events_total", "type=\"PREFIX_EVICTED\""));
  return metric("seq_gaps_total") == 0 && metric("superseded_entries_total") == 0 &&
         metric("tracked_blocks") == static_cast<double>(w.live_blocks + 1);
}

}  // namespace

int main(int argc, char** argv) {
  int batches = 4000, events_per_batch = 16, blocks_per_event = 4, live_events = 4096, cpu = 1;
  CLI::App app{"inferencecache-kvevents throughput benchmark"};
  app.add_option("--batches", batches, "batches published")->capture_default_str();
  app.add_option("--events-per-batch", events_per_batch, "BlockStored events per batch")
      ->capture_default_str();
  app.add_option("--blocks-per-event", blocks_per_event, "blocks per BlockStored")
      ->capture_default_str();
  app.add_option("--live-events", live_events,
                 "stored events the engine keeps; older ones are removed (an LRU engine)")
      ->capture_default_str();
  app.add_option("--adapter-cpu", cpu, "CPU the adapter is pinned to")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto& server = shared_server();  // --threads 1, pinned to the first CPU
  auto pub = make_publisher(false);
  auto flags = adapter_flags(*pub, server.grpc_port(), tenant(60), false);
  for (std::size_t i = 0; i + 1 < flags.size(); ++i) {
    if (flags[i] == "--window") flags[i + 1] = "20ms";
  }
  flags.insert(flags.end(), {"--log-level", "warn"});
  // The adapter inherits this affinity; the benchmark's own is restored after the spawn.
  cpu_set_t mine, one;
  sched_getaffinity(0, sizeof mine, &mine);
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  sched_setaffinity(0, sizeof one, &one);
  AdapterProcess adapter(flags);
  sched_setaffinity(0, sizeof mine, &mine);
  if (!pub->wait_for_subscriber(std::chrono::seconds(30))) return 1;

  const Workload work = make_workload(batches, events_per_batch, blocks_per_event, live_events);

  const pid_t pid = adapter.pid();
  const double cpu0 = cpu_seconds(pid);
  const double server_cpu0 = cpu_seconds(server.pid());
  const auto t0 = Clock::now();
  // At most `ahead` batches in flight, so ZeroMQ's queues never overflow (that would be a gap).
  const int ahead = 512;
  for (int b = 0; b < batches; ++b) {
    if (b % 128 == 0 && b >= ahead) {
      adapter.wait_metric("inferencecache_kvevents_batches_total", "", b - ahead,
                          std::chrono::seconds(60));
    }
    pub->publish(work.payloads[static_cast<std::size_t>(b)]);
  }
  const bool done = adapter.wait_metric("inferencecache_kvevents_batches_total", "", batches,
                                        std::chrono::seconds(300));
  const auto t1 = Clock::now();
  // Everything the adapter sent has reached the server once a later marker is answered: the
  // adapter's work ends there (its evictions are calls in flight until then).
  barrier(*pub, server.grpc_port(), tenant(60));
  const auto t2 = Clock::now();
  const double cpu_used = cpu_seconds(pid) - cpu0;
  const double server_cpu_used = cpu_seconds(server.pid()) - server_cpu0;
  const double decode_wall = std::chrono::duration<double>(t1 - t0).count();
  const double wall = std::chrono::duration<double>(t2 - t0).count();
  const bool clean =
      report(adapter, work, batches, cpu, wall, decode_wall, cpu_used, server_cpu_used) && done;
  std::printf("%s\n", clean ? "OK: nothing dropped" : "FAILED: drops or a mismatch (see above)");
  return clean ? 0 : 1;
}
