// A plain-SVG line chart (SVG 1.1, no library): hit ratio per trace time window per policy.
#pragma once

#include <string>
#include <vector>

namespace ic::tools::replay {

// One line: a label and one value per window (fraction in [0, 1]; NaN = no data, a gap).
struct Series {
  std::string label;
  std::vector<double> values;
  bool dashed = false;
};

// Renders the chart: x = trace time in minutes (window i spans [i, i+1)·window_minutes),
// y = hit ratio in percent, one polyline per series, a legend and a title.
std::string render_hit_ratio_svg(const std::string& title, const std::vector<Series>& series,
                                 double window_minutes);

// One policy's load: requests per replica divided by the mean (1.0 = even).
struct LoadBars {
  std::string label;
  std::vector<double> per_replica;
};

// The hit-ratio chart with a per-replica load panel below it: one group of bars per policy.
std::string render_replay_svg(const std::string& title, const std::vector<Series>& series,
                              double window_minutes, const std::vector<LoadBars>& loads);

// The replay's chart: the hit-ratio panel, a TTFT panel below it (`ttft`: mean TTFT in seconds
// per window and policy) and the per-replica load panel at the bottom.
std::string render_replay_svg(const std::string& title, const std::vector<Series>& hits,
                              const std::vector<Series>& ttft, double window_minutes,
                              const std::vector<LoadBars>& loads);

}  // namespace ic::tools::replay
