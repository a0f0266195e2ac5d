// The bench's results: merged across threads, rendered as text or JSON.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/worker.hh"
#include "common/latency.hh"

namespace ic::tools::bench {

// The run's settings as given on the command line, defaulting to the flags' defaults.
struct RunDescription {
  std::string server = "127.0.0.1:9090";
  std::string rpc = "lookup";  // or "report"
  std::string path;            // the measured method's path
  double rate = 1000;          // calls/s; 0 = closed loop
  int connections = 4;
  int streams = 16;  // per connection
  int threads = 1;
  double duration_s = 10;
  std::string source;  // "synthetic" or the trace path
  std::int64_t bad_lines = 0;
  std::int64_t start_ns = 0;
  bool interrupted = false;
};
// nlohmann::json(run): the report's "config" without its computed "mode" (start_ns and
// interrupted are not settings).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RunDescription, server, rpc, path, rate, connections, streams,
                                   threads, duration_s, source, bad_lines)

// The merged results of a run.
struct Summary {
  RunDescription run;
  std::uint64_t sent = 0, completed = 0, ok = 0, not_sent = 0, unfinished = 0;
  double elapsed_s = 0;     // first intended send → last answer
  double achieved_qps = 0;  // completed / elapsed_s
  double ok_qps = 0;        // OK answers / elapsed_s
  std::map<std::string, std::uint64_t> statuses;
  std::map<std::string, std::uint64_t> reasons;
  LatencySummary latency;
  std::vector<HistogramBucket> histogram;
};
// nlohmann::json(summary): the report's figures; render_json adds the run.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Summary, sent, completed, ok, not_sent, unfinished, elapsed_s,
                                   achieved_qps, ok_qps, statuses, reasons, latency, histogram)

// Adds up the workers' results and computes rates, percentiles and the histogram.
Summary merge(const RunDescription& run, std::vector<WorkerResult>& results);

// The report's first two lines: what runs against what ("inferencecache-bench: <path> open
// loop at N calls/s, C connections x S streams, T thread(s), D s", then the requests' source
// and the server). Printed to stderr as the run starts, and again atop render_text.
std::string render_header(const RunDescription& run);

// The human report: the header, counts, rate, statuses, reasons, percentiles and a log2
// histogram.
std::string render_text(const Summary& summary);

// Schema "inferencecache-bench/v1".
nlohmann::json render_json(const Summary& summary);

}  // namespace ic::tools::bench
