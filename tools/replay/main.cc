// inferencecache-replay: replays a Mooncake trace against a running InferenceCache server (or
// the in-process index, --index in-process) and compares routing policies by time to first token
// on simulated prefill replicas (tools/README.md).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <utility>

#include "common/channel.hh"
#include "common/cli_parse.hh"
#include "common/interrupt.hh"
#include "common/progress.hh"
#include "common/trace.hh"
#include "replay/grpc_index_client.hh"
#include "replay/in_process_index_client.hh"
#include "replay/pd_run.hh"
#include "replay/replay_run.hh"
#include "replay/report.hh"

namespace {

using namespace ic::tools;
using namespace ic::tools::replay;

// Relative to the repository root, where the README runs the tools from.
constexpr const char* kDefaultTrace = "tests/data/traces/mooncake_fast25_conversation_trace.jsonl";

struct Flags {
  std::string address = "127.0.0.1:9090";
  std::string index = "server";
  std::vector<std::string> index_flags;
  bool tenant_prefix_given = false;
  std::string trace = kDefaultTrace;
  std::string on_bad_line = "skip";
  std::int64_t limit = 0;
  std::string svg_path;
  std::string json_path;
  bool json = false;
  bool no_progress = false;
  bool keep_state = false;
  bool realtime = false;
  int connect_timeout_ms = 3000;
  int rpc_timeout_ms = 2000;
  double window_s = 60;
  std::string stats = "1";
  std::string clock = "auto";
  std::vector<std::string> policies = {"round-robin", "least-work", "full-knowledge",
                                       "inferencecache"};
  std::string gateway = "follow";
  std::string pressure = "on";
  bool pd = false;
  std::string pd_topology_out;
  std::vector<std::string> pd_policies = {"full-knowledge", "decode-first", "inferencecache"};
};

// "none" → 0; a positive number of seconds → ms; anything else → nullopt.
std::optional<std::int64_t> parse_stats(const std::string& text) {
  if (text == "none") return 0;
  try {
    std::size_t used = 0;
    const double s = std::stod(text, &used);
    if (used != text.size() || !(s > 0) || s > 86'400) return std::nullopt;
    return static_cast<std::int64_t>(s * 1000.0);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// P/D mode (docs/pd-routing.md, tools/README.md "P/D mode").
void add_pd_flags(CLI::App& app, Flags& f, PdOptions& o) {
  app.add_flag("--pd", f.pd,
               "P/D mode: a prefill pool and a decode pool; compares full-knowledge, "
               "decode-first and inferencecache (LookupPDRoute) by TTFT and time between tokens");
  app.add_option("--prefill-replicas", o.prefill_replicas, "P/D: prefill replicas")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--decode-replicas", o.decode_replicas, "P/D: decode replicas")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--decode-slots", o.decode_slots, "P/D: decodes a decode replica runs at once")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--step-ms", o.step_ms, "P/D: decode step with one running decode, ms")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--step-per-seq-ms", o.step_per_seq_ms,
                 "P/D: added to a decode step per running decode, ms")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--min-uncached-tokens", o.min_uncached_tokens,
                 "P/D: disaggregate when the decode replica would prefill at least this many")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 31))
      ->capture_default_str();
  app.add_option("--pd-topology", o.topology, "P/D: pd_topology_ref sent to the server")
      ->capture_default_str();
  app.add_option("--pd-affinity-weight", o.affinity_weight,
                 "P/D: the topology's affinityWeight in --pd-topology-out")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--pd-topology-out", f.pd_topology_out,
                 "P/D: write the policy document with this replay's topology (for the server's "
                 "--policy-file) and exit");
  app.add_option("--pd-policies", f.pd_policies, "P/D: policies to compare, in this order")
      ->delimiter(',')
      ->check(CLI::IsMember({"full-knowledge", "decode-first", "inferencecache"}))
      ->capture_default_str();
}

void add_flags(CLI::App& app, Flags& f, ReplayOptions& o) {
  app.add_option("--server", f.address, "gRPC address of the InferenceCache server")
      ->capture_default_str();
  add_choice(app, "--index", f.index,
             "what the inferencecache policy asks: server = the server at --server, on the wall "
             "clock; in-process = one index shard in this process, on trace time (virtual clock, "
             "deterministic; tools/README.md \"In-process index\")",
             {"server", "in-process"});
  app.add_option("--index-flag", f.index_flags,
                 "--index in-process: a server flag NAME=VALUE (or NAME) for the index, read by "
                 "the server's own parser (e.g. uncached-weight=0.5; help lists them); repeat");
  app.add_option("--trace", f.trace, "Mooncake-format JSONL trace")->capture_default_str();
  app.add_option("--requests,--limit", f.limit, "replay only the first N requests (0 = all)");
  add_choice(app, "--on-bad-line", f.on_bad_line, "malformed trace line: skip (report) or fail",
             {"skip", "fail"});
  app.add_option("--replicas", o.replicas, "simulated prefill replicas")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--capacity-blocks", o.capacity_blocks,
                 "LRU KV capacity per replica in 512-token blocks")
      ->check(CLI::Range(1, 100'000'000))
      ->capture_default_str();
  app.add_option("--prefill-rate", o.prefill_rates,
                 "prefill tokens/s per replica; a list (6000,3000) is cycled over the replicas")
      ->delimiter(',')
      ->check(CLI::Range(1.0, 1e9))
      ->capture_default_str();
  app.add_option("--slots", o.slots,
                 "requests queued or in prefill at pressure 1.0 (and the override gateway's bound)")
      ->check(CLI::Range(1, 1'000'000))
      ->capture_default_str();
  app.add_option("--window-s", f.window_s, "trace-time window for balance and the chart (s)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--stats", f.stats,
                 "ReplicaStats every S seconds of trace time, or none (only KV events reach the "
                 "server)")
      ->check([](const std::string& s) {
        return parse_stats(s) ? "" : "must be none or a positive number of seconds";
      })
      ->capture_default_str();
  app.add_option("--policies", f.policies, "policies to compare, in this order")
      ->delimiter(',')
      ->check(CLI::IsMember({"round-robin", "least-work", "full-knowledge", "inferencecache"}))
      ->capture_default_str();
  add_choice(app, "--gateway", f.gateway,
             "inferencecache lane: follow = take the top hint as given; override = skip hinted "
             "replicas with --slots requests outstanding",
             {"follow", "override"});
  app.add_option("--follow-fraction", o.follow_fraction,
                 "share of hints the inferencecache gateway follows (a fixed choice per request; "
                 "least-work for the others)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  add_choice(app, "--pressure", f.pressure,
             "ReplicaStats carry pressure = outstanding requests / slots (on) or 0 (off)",
             {"on", "off"});
  add_choice(app, "--clock", f.clock,
             "auto = the wall clock (trace time / --speed) when inferencecache talks to the "
             "server, else virtual; wall; virtual (as fast as possible)",
             {"auto", "wall", "virtual"});
  app.add_flag("--realtime", f.realtime, "the wall clock even without a server (= --clock wall)");
  app.add_option("--speed", o.speed, "wall time = trace time / speed on the wall clock")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--tenant-prefix", o.tenant_prefix,
                 "tenant of each policy = PREFIX-<policy> (default replay-<unix time>)");
  app.add_option("--model", o.model_id, "model_id sent with every call")->capture_default_str();
  app.add_option("--hash-scheme", o.hash_scheme, "hash_scheme (must be non-empty)")
      ->check([](const std::string& s) { return s.empty() ? "hash scheme must be non-empty" : ""; })
      ->capture_default_str();
  app.add_flag("--keep-state", f.keep_state,
               "leave the replayed entries in the server (default: ALL_CLEARED at the end)");
  app.add_option("--svg", f.svg_path,
                 "write the chart (hit ratio, TTFT and load per replica) as SVG here");
  app.add_flag("--json", f.json, "print the results as JSON on stdout");
  app.add_option("--json-out", f.json_path,
                 "also write the JSON document to this file (the table still goes to stdout)");
  app.add_flag("--no-progress", f.no_progress, "no progress bar even on a terminal");
  app.add_option("--connect-timeout-ms", f.connect_timeout_ms, "wait this long for the server")
      ->capture_default_str();
  app.add_option("--rpc-timeout-ms", f.rpc_timeout_ms, "deadline of each unary call")
      ->capture_default_str();
}

// The in-process index of --index in-process, built from --index-flag as the server builds its
// own from its flags; nullptr when the server is asked. *exit_code is set (and the reason
// printed) when the replay must stop: 0 after `--index-flag help`, 2 for a bad flag.
std::unique_ptr<InProcessIndexClient> make_in_process(const Flags& f,
                                                      std::optional<int>* exit_code) {
  if (f.index != "in-process") {
    if (!f.index_flags.empty()) {
      std::cerr << "inferencecache-replay: error: --index-flag needs --index in-process (a server "
                   "takes its flags itself)\n";
      *exit_code = 2;
    }
    return nullptr;
  }
  std::vector<std::string> args;
  for (const auto& flag : f.index_flags)
    args.push_back(flag.rfind('-', 0) == 0 ? flag : "--" + flag);
  auto made = InProcessIndexClient::from_server_args(args);
  if (made.client) return std::move(made.client);
  if (made.exit_code == 0) {
    std::cout << made.message << (made.message.ends_with('\n') ? "" : "\n");
  } else {
    std::cerr << "inferencecache-replay: error: --index-flag: " << made.message << "\n";
  }
  *exit_code = made.exit_code;
  return nullptr;
}

// "server HOST:PORT" or what the in-process index is, for the report's header.
std::string index_text(const Flags& f) {
  if (f.index == "server") return f.address;
  std::string text = "none, in-process index (one shard on trace time";
  for (const auto& flag : f.index_flags) text += "; " + flag;
  return text + ")";
}

// Bad trace lines printed one by one; the rest are only counted.
constexpr std::int64_t kBadLinesShown = 10;

// "" when `path` (empty: no output) can be written: its directory exists and is writable, and
// the file, if it exists, is writable. Checked before the replay so that a typo does not cost a
// whole run.
std::string check_output_path(const std::string& path) {
  if (path.empty()) return {};
  const std::filesystem::path p(path);
  const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : ".";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return "directory " + dir.string() + " does not exist";
  if (std::filesystem::is_directory(p, ec)) return path + " is a directory";
  if (std::filesystem::exists(p, ec) ? ::access(path.c_str(), W_OK) != 0
                                     : ::access(dir.c_str(), W_OK) != 0) {
    return "cannot write " + path + ": " + std::strerror(errno);
  }
  return {};
}

// After Ctrl-C: say what the replay left in the server.
void report_interrupted(const ReplayResult& result, bool keep_state) {
  std::string tenants;
  for (const auto& policy : result.policies) {
    if (!talks_to_server(policy.policy)) continue;
    tenants += (tenants.empty() ? "" : ", ") + policy.scope.tenant_id;
  }
  if (tenants.empty()) return;  // nothing was written to the server
  if (!result.fatal_error.empty()) {
    std::cerr << "inferencecache-replay: interrupted; cleanup failed (" << result.fatal_error
              << "): entries may remain under tenants " << tenants << "\n";
  } else if (keep_state) {
    std::cerr << "inferencecache-replay: interrupted; --keep-state: the replayed entries stay in "
                 "the server under tenants "
              << tenants << "\n";
  } else {
    std::cerr << "inferencecache-replay: interrupted; removed the replayed entries "
                 "(ALL_CLEARED for every replica of tenants "
              << tenants << ")\n";
  }
}

// P/D mode: the trace is loaded as in the prefill-only mode.
int run_pd(const Flags& f, const ReplayOptions& base, PdOptions& o,
           const std::vector<TraceRequest>& trace, std::int64_t bad_lines,
           std::unique_ptr<InProcessIndexClient> in_process) {
  o.capacity_blocks = base.capacity_blocks;
  if (!base.prefill_rates.empty()) o.prefill_rate = base.prefill_rates.front();
  // The in-process index keeps trace time: the topology's decode hold is in trace ms.
  o.speed = in_process ? 1.0 : base.speed;
  o.clock = base.clock;
  o.stats_interval_ms = base.stats_interval_ms;
  o.tenant_prefix = base.tenant_prefix;
  o.model_id = base.model_id;
  o.hash_scheme = base.hash_scheme;
  o.clear_at_end = base.clear_at_end;
  if (!f.pd_topology_out.empty()) {
    std::ofstream out(f.pd_topology_out);
    out << pd_topology_json(o, trace) << "\n";
    if (!out) {
      std::cerr << "inferencecache-replay: error: cannot write " << f.pd_topology_out << "\n";
      return 1;
    }
    return 0;
  }
  o.policies.clear();
  bool server_lane = false;
  for (const auto& name : f.pd_policies) {
    o.policies.push_back(name == "full-knowledge" ? PdPolicy::kFullKnowledge
                         : name == "decode-first" ? PdPolicy::kDecodeFirst
                                                  : PdPolicy::kInferenceCache);
    server_lane = server_lane || o.policies.back() == PdPolicy::kInferenceCache;
  }
  if (server_lane && in_process && !in_process->has_pd_topologies()) {
    // Every answer would be UNKNOWN_TOPOLOGY (a fallback to decode-first): a flag forgotten.
    std::cerr << "inferencecache-replay: error: --pd --index in-process needs a topology: write "
                 "it with --pd-topology-out FILE, then pass --index-flag policy-file=FILE\n";
    return 2;
  }
  std::string error;
  std::unique_ptr<IndexClient> client = std::make_unique<OfflineIndexClient>();
  if (server_lane && in_process) {
    client = std::move(in_process);
  } else if (server_lane) {
    auto lookups = connect_channel(f.address, f.connect_timeout_ms, "lookup", &error);
    auto ingest =
        lookups ? connect_channel(f.address, f.connect_timeout_ms, "ingest", &error) : nullptr;
    if (!lookups || !ingest) {
      std::cerr << "inferencecache-replay: error: " << error << "\n";
      return 1;
    }
    client = std::make_unique<GrpcIndexClient>(lookups, ingest, f.rpc_timeout_ms);
  }
  ProgressBar progress(static_cast<std::int64_t>(trace.size()), !f.no_progress);
  const PdResult result = run_pd_replay(trace, o, *client, progress);
  if (bad_lines > 0) std::cerr << "inferencecache-replay: " << bad_lines << " bad trace lines\n";
  if (f.json) {
    std::cout << render_pd_json(result, o, f.trace).dump(2) << "\n";
  } else {
    std::cout << render_pd_text(result, o, f.trace);
  }
  if (!f.json_path.empty()) {
    std::ofstream json(f.json_path);
    json << render_pd_json(result, o, f.trace).dump(2) << "\n";
    if (!json) {
      std::cerr << "inferencecache-replay: error: cannot write " << f.json_path << "\n";
      return 1;
    }
  }
  if (result.interrupted) return kInterruptedExit;
  if (!result.fatal_error.empty()) {
    std::cerr << "inferencecache-replay: error: " << result.fatal_error << "\n";
    return 1;
  }
  return 0;
}

int run(const Flags& f, ReplayOptions& o, PdOptions& pd) {
  o.window_ms = static_cast<std::int64_t>(f.window_s * 1000);
  o.stats_interval_ms = *parse_stats(f.stats);
  o.clear_at_end = !f.keep_state;
  o.gateway = f.gateway == "override" ? Gateway::kOverride : Gateway::kFollow;
  o.report_pressure = f.pressure == "on";
  o.clock = f.realtime || f.clock == "wall"
                ? Clock::kWall
                : (f.clock == "virtual" ? Clock::kVirtual : Clock::kAuto);
  std::optional<int> exit_code;
  std::unique_ptr<InProcessIndexClient> in_process = make_in_process(f, &exit_code);
  if (exit_code) return *exit_code;
  if (in_process) {
    // The index keeps trace time itself: nothing to pace. No server is shared either, so the
    // tenants need no run-unique prefix (and the report is the same in every run).
    if (o.clock == Clock::kAuto) o.clock = Clock::kVirtual;
    if (!f.tenant_prefix_given) o.tenant_prefix = "replay";
  }
  o.policies.clear();
  bool server_lane = false;
  for (const auto& name : f.policies) {
    o.policies.push_back(*parse_policy(name));
    server_lane = server_lane || talks_to_server(o.policies.back());
  }
  for (const auto& [flag, path] : {std::pair{"--svg", f.svg_path}, {"--json-out", f.json_path}}) {
    if (std::string why = check_output_path(path); !why.empty()) {
      std::cerr << "inferencecache-replay: error: " << flag << ": " << why << "\n";
      return 2;
    }
  }
  const auto policy = *parse_bad_line_policy(f.on_bad_line);
  std::int64_t shown = 0;
  auto load = load_trace(f.trace, policy, f.limit, [&shown](const std::string& message) {
    if (shown++ < kBadLinesShown) {
      std::cerr << "inferencecache-replay: bad trace line: " << message << "\n";
    }
  });
  if (shown > kBadLinesShown) {
    std::cerr << "inferencecache-replay: " << shown - kBadLinesShown
              << " more bad trace lines not shown (" << shown << " in all)\n";
  }
  if (!load.error.empty()) {
    std::cerr << "inferencecache-replay: error: " << load.error << "\n";
    return 1;
  }
  if (load.requests.empty()) {
    std::cerr << "inferencecache-replay: error: no requests in " << f.trace << "\n";
    return 1;
  }
  if (f.pd || !f.pd_topology_out.empty()) {
    return run_pd(f, o, pd, load.requests, load.bad_lines, std::move(in_process));
  }
  // Only the inferencecache policy talks to the server; without it the replay is a simulation.
  std::string error;
  std::unique_ptr<IndexClient> client = std::make_unique<OfflineIndexClient>();
  if (server_lane && in_process) {
    client = std::move(in_process);
  } else if (server_lane) {
    auto lookups = connect_channel(f.address, f.connect_timeout_ms, "lookup", &error);
    auto ingest =
        lookups ? connect_channel(f.address, f.connect_timeout_ms, "ingest", &error) : nullptr;
    if (!lookups || !ingest) {
      std::cerr << "inferencecache-replay: error: " << error << "\n";
      return 1;
    }
    client = std::make_unique<GrpcIndexClient>(lookups, ingest, f.rpc_timeout_ms);
  }
  ProgressBar progress(static_cast<std::int64_t>(load.requests.size()), !f.no_progress);
  const ReplayResult result = run_replay(load.requests, o, *client, progress);

  const RunInfo info{f.trace, static_cast<std::int64_t>(load.requests.size()), load.bad_lines,
                     server_lane ? index_text(f) : "none (no policy asks it)"};
  if (f.json) {
    std::cout << render_json(result, o, info).dump(2) << "\n";
  } else {
    std::cout << render_text(result, o, info);
  }
  if (!f.svg_path.empty()) {
    std::ofstream svg(f.svg_path);
    svg << render_svg(result, o);
    if (!svg) {
      std::cerr << "inferencecache-replay: error: cannot write " << f.svg_path << "\n";
      return 1;
    }
    if (!f.json) std::cout << "chart: " << f.svg_path << "\n";
  }
  if (!f.json_path.empty()) {
    std::ofstream json(f.json_path);
    json << render_json(result, o, info).dump(2) << "\n";
    if (!json) {
      std::cerr << "inferencecache-replay: error: cannot write " << f.json_path << "\n";
      return 1;
    }
  }
  if (result.interrupted) {
    if (f.index == "server") report_interrupted(result, f.keep_state);
    return kInterruptedExit;
  }
  if (!result.fatal_error.empty()) {
    std::cerr << "inferencecache-replay: error: " << result.fatal_error << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Replay a Mooncake trace against InferenceCache and compare routing policies",
               "inferencecache-replay"};
  Flags flags;
  ReplayOptions options;
  PdOptions pd;
  options.tenant_prefix = "replay-" + std::to_string(std::time(nullptr));
  add_flags(app, flags, options);
  add_pd_flags(app, flags, pd);
  standard_flags(app);
  parse_or_exit(app, argc, argv);
  flags.tenant_prefix_given = app.count("--tenant-prefix") > 0;
  install_interrupt_handler();
  return run(flags, options, pd);
}
