// inferencecache-bench: a load generator for LookupRoute / ReportCacheState on libnghttp2's
// client API (tools/bench/README.md). Open loop at a fixed rate (latency from the intended send
// time) or closed loop at fixed concurrency, C connections x S streams over T threads.
#include <poll.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <thread>

#include "bench/h2_connection.hh"
#include "bench/report.hh"
#include "bench/worker.hh"
#include "bench/workload.hh"
#include "common/cli_parse.hh"
#include "common/interrupt.hh"
#include "common/progress.hh"
#include "common/trace.hh"

namespace {

using namespace ic::tools;
using namespace ic::tools::bench;

struct Flags {
  RunDescription run;  // the settings the report repeats; run() fills in the rest
  int drain_ms = 2000;
  int connect_timeout_ms = 3000;
  std::string trace;
  std::int64_t limit = 0;
  std::string on_bad_line = "skip";
  bool preload = true;
  SyntheticSpec synthetic;
  Scope scope{"bench", "bench-model", "mooncake"};
  std::string dump_body;
  bool json = false;
};

// The settings the report repeats (RunDescription).
void add_run_flags(CLI::App& app, RunDescription& run) {
  app.add_option("--server", run.server, "gRPC host:port of the InferenceCache server")
      ->capture_default_str();
  add_choice(
      app, "--rpc", run.rpc,
      "measured call: lookup (LookupRoute) or report (ReportCacheState, one update per call)",
      {"lookup", "report"});
  app.add_option("-r,--rate", run.rate,
                 "target calls/s over all connections, open loop; 0 = closed loop (every stream "
                 "always busy)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("-c,--connections", run.connections, "TCP connections")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  app.add_option("-m,--streams", run.streams, "concurrent streams per connection")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("-t,--threads", run.threads, "threads (each drives a group of connections)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  app.add_option("-D,--duration", run.duration_s, "measurement time (s)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

void add_flags(CLI::App& app, Flags& f) {
  add_run_flags(app, f.run);
  app.add_option("--drain-ms", f.drain_ms, "after the duration, wait this long for answers")
      ->capture_default_str();
  app.add_option("--connect-timeout-ms", f.connect_timeout_ms)->capture_default_str();
  app.add_option("--trace", f.trace,
                 "take requests from this Mooncake JSONL trace (else synthetic)");
  app.add_option("--limit", f.limit, "use only the first N trace requests");
  add_choice(app, "--on-bad-line", f.on_bad_line, "malformed trace line: skip (report) or fail",
             {"skip", "fail"});
  app.add_option("--preload", f.preload,
                 "store the prompts (ReportCacheState) before measuring lookups")
      ->capture_default_str();
  app.add_option("--blocks", f.synthetic.blocks, "synthetic: blocks per prompt")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--replicas", f.synthetic.replicas, "replicas the prompts are stored on")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--hit-ratio", f.synthetic.hit_ratio, "synthetic: share of lookups that hit")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--distinct", f.synthetic.distinct, "synthetic: distinct stored prompts")
      ->check(CLI::Range(1, 10'000'000))
      ->capture_default_str();
  app.add_option("--seed", f.synthetic.seed, "synthetic: random seed")->capture_default_str();
  app.add_option("--tenant", f.scope.tenant_id, "tenant_id")->capture_default_str();
  app.add_option("--model", f.scope.model_id, "model_id")->capture_default_str();
  app.add_option("--hash-scheme", f.scope.hash_scheme, "hash_scheme (non-empty)")
      ->check([](const std::string& s) { return s.empty() ? "hash scheme must be non-empty" : ""; })
      ->capture_default_str();
  app.add_option("--dump-body", f.dump_body,
                 "write the first request body (gRPC-framed) here, for h2load -d");
  app.add_flag("--json", f.json, "print the results as JSON on stdout");
}

// Sends every preload body as its own ReportCacheState call and waits for all Acks.
bool preload(const std::string& host, int port, const Flags& f, const Workload& w,
             std::string* error) {
  if (w.preload.empty()) return true;
  std::uint64_t done = 0, failed = 0;
  std::string first_failure;
  H2Connection conn(host, port, f.connect_timeout_ms, [&](CallOutcome&& outcome) {
    ++done;
    if (outcome.status != "OK" && failed++ == 0) first_failure = outcome.status;
  });
  const auto deadline = now_ns() + 30'000'000'000;
  std::size_t next = 0;
  while (done < w.preload.size() && now_ns() < deadline && !interrupted() && conn.alive()) {
    while (next < w.preload.size() && conn.active() < 64) {
      conn.start(kReportPath, w.preload[next++], now_ns());
    }
    conn.pump();
    pollfd p{conn.fd(), static_cast<short>(POLLIN | (conn.wants_write() ? POLLOUT : 0)), 0};
    poll(&p, 1, 10);
  }
  if (failed > 0 || done < w.preload.size()) {
    *error = "preload: " + std::to_string(done) + "/" + std::to_string(w.preload.size()) +
             " ReportCacheState calls answered, " + std::to_string(failed) +
             " failed (first: " + first_failure + ")";
    return false;
  }
  return true;
}

// A progress bar over the run's duration on a terminal's stderr (ProgressBar draws nothing
// otherwise) until `workers` threads have finished.
void show_progress(std::int64_t start_ns, std::int64_t duration_ns,
                   const std::atomic<std::size_t>& finished, std::size_t workers) {
  ProgressBar bar(duration_ns / 1'000'000, true);
  while (finished.load() < workers) {
    bar.update(
        std::clamp<std::int64_t>((now_ns() - start_ns) / 1'000'000, 0, duration_ns / 1'000'000),
        "measuring");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  bar.finish();
}

int run(const Flags& f) {
  std::string host;
  int port = 0;
  if (!split_host_port(f.run.server, &host, &port)) {
    std::cerr << "inferencecache-bench: error: --server must be host:port, got " << f.run.server
              << "\n";
    return 2;
  }
  const Rpc rpc = f.run.rpc == "lookup" ? Rpc::kLookup : Rpc::kReport;
  Workload workload;
  std::int64_t bad_lines = 0;
  if (!f.trace.empty()) {
    auto load = load_trace(f.trace, *parse_bad_line_policy(f.on_bad_line), f.limit,
                           [](const std::string& m) {
                             std::cerr << "inferencecache-bench: bad trace line: " << m << "\n";
                           });
    bad_lines = load.bad_lines;
    if (!load.error.empty() || load.requests.empty()) {
      std::cerr << "inferencecache-bench: error: "
                << (load.error.empty() ? "no requests in " + f.trace : load.error) << "\n";
      return 1;
    }
    workload = trace_workload(load.requests, f.scope, rpc, f.synthetic.replicas, f.preload);
  } else {
    workload = synthetic_workload(f.synthetic, f.scope, rpc);
    if (!f.preload) workload.preload.clear();
  }
  RunDescription run = f.run;
  run.path = workload.path;
  run.source = f.trace.empty() ? "synthetic" : f.trace;
  // Said at once (stderr, so --json output stays one document): a long run is not silent.
  std::cerr << render_header(run) << std::flush;
  if (!f.dump_body.empty()) {
    std::ofstream out(f.dump_body, std::ios::binary);
    out << *workload.bodies[workload.order[0]];
    if (!out) {
      std::cerr << "inferencecache-bench: error: cannot write " << f.dump_body << "\n";
      return 1;
    }
  }

  std::vector<WorkerResult> results(static_cast<std::size_t>(f.run.threads));
  std::vector<WorkerPlan> plans(static_cast<std::size_t>(f.run.threads));
  std::vector<std::vector<std::unique_ptr<H2Connection>>> groups(plans.size());
  try {
    std::string error;
    if (!preload(host, port, f, workload, &error)) {
      std::cerr << "inferencecache-bench: error: " << error << "\n";
      return 1;
    }
    for (int c = 0; c < f.run.connections; ++c) {
      const auto t = static_cast<std::size_t>(c % f.run.threads);
      WorkerPlan* plan = &plans[t];
      WorkerResult* result = &results[t];
      groups[t].push_back(std::make_unique<H2Connection>(
          host, port, f.connect_timeout_ms,
          [plan, result](CallOutcome&& o) { record_outcome(*plan, std::move(o), result); }));
    }
  } catch (const std::exception& e) {
    std::cerr << "inferencecache-bench: error: " << e.what() << "\n";
    return 1;
  }
  // Start a little in the future so every thread begins on the same schedule.
  const std::int64_t start = now_ns() + 20'000'000;
  const auto duration_ns = static_cast<std::int64_t>(f.run.duration_s * 1e9);
  std::vector<std::thread> threads;
  std::atomic<std::size_t> finished{0};
  for (std::size_t t = 0; t < plans.size(); ++t) {
    auto& plan = plans[t];
    const auto share = static_cast<double>(groups[t].size()) / f.run.connections;
    plan.rate_per_s = f.run.rate * share;
    plan.streams = f.run.streams;
    plan.start_ns = start;
    plan.end_ns = start + duration_ns;
    plan.drain_ns = static_cast<std::int64_t>(f.drain_ms) * 1'000'000;
    plan.order_offset = t * 7919;  // threads walk the order from different points
    plan.decode_reasons = rpc == Rpc::kLookup;
    if (groups[t].empty()) continue;
    threads.emplace_back([&, t] {
      run_worker(plans[t], workload, groups[t], &results[t]);
      finished.fetch_add(1);
    });
  }
  show_progress(start, duration_ns, finished, threads.size());
  for (auto& thread : threads) thread.join();

  run.bad_lines = bad_lines;
  run.start_ns = start;
  run.interrupted = interrupted();
  const Summary summary = merge(run, results);
  if (f.json) {
    std::cout << render_json(summary).dump(2) << "\n";
  } else {
    std::cout << render_text(summary);
  }
  if (interrupted()) return kInterruptedExit;
  return summary.completed > 0 && summary.ok == summary.completed ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Load generator for the InferenceCache gRPC API (nghttp2 client, open loop)",
               "inferencecache-bench"};
  Flags flags;
  add_flags(app, flags);
  standard_flags(app);
  parse_or_exit(app, argc, argv);
  install_interrupt_handler();
  return run(flags);
}
