// Turning a ReplayResult into the human table, the --json document and the SVG chart.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "replay/replay_run.hh"

namespace ic::tools::replay {

// Facts about the run printed in the header.
struct RunInfo {
  std::string trace_path;
  std::int64_t trace_requests = 0;
  std::int64_t bad_lines = 0;
  std::string server;
};

// The comparison table (one row per policy, then the upper bound, reasons and balance notes).
std::string render_text(const ReplayResult& result, const ReplayOptions& options,
                        const RunInfo& info);

// Machine-readable form of the same numbers (schema: "inferencecache-replay/v1").
nlohmann::json render_json(const ReplayResult& result, const ReplayOptions& options,
                           const RunInfo& info);

// The hit-ratio-over-time chart, one line per policy plus the dashed upper bound.
std::string render_svg(const ReplayResult& result, const ReplayOptions& options);

}  // namespace ic::tools::replay
