#include "replay/chart.hh"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ic::tools::replay {
namespace {

constexpr double kWidth = 960, kHeight = 480, kLoadHeight = 260;
constexpr double kLeft = 70, kRight = 250, kTop = 50, kBottom = 60;
constexpr const char* kColors[] = {"#d62728", "#1f77b4", "#2ca02c", "#555555", "#9467bd"};

std::string fmt(const char* format, double a, double b = 0, double c = 0, double d = 0) {
  char buffer[160];
  std::snprintf(buffer, sizeof buffer, format, a, b, c, d);
  return buffer;
}

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

}  // namespace

std::string svg_open(double height) {
  return fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
             "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
             kWidth, height, kWidth, height) +
         "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
}

// The y axis of a line panel: hit ratios in percent, or TTFT in seconds.
enum class Axis { kPercent, kSeconds };

// A tick step giving 3-10 round ticks up to `top` seconds.
double seconds_step(double top) {
  for (double step : {0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0}) {
    if (top / step <= 10) return step;
  }
  return 200.0;
}

// A line panel (everything but the <svg> element), kHeight tall from y = `y0`.
std::string line_panel(const std::string& title, const std::vector<Series>& series,
                       double window_minutes, Axis axis, const std::string& y_label, double y0) {
  std::size_t windows = 0;
  double top = axis == Axis::kPercent ? 0.1 : 1.0;
  for (const auto& s : series) {
    windows = std::max(windows, s.values.size());
    for (double v : s.values) {
      if (!std::isnan(v)) top = std::max(top, v);
    }
  }
  // y axis to the next 10 % or the next tick.
  const double tick_step = axis == Axis::kPercent ? (top <= 0.3 ? 0.05 : 0.1) : seconds_step(top);
  top = axis == Axis::kPercent ? std::ceil(top * 10.0) / 10.0
                               : std::ceil(top / tick_step) * tick_step;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  const double minutes = std::max(1.0, static_cast<double>(windows) * window_minutes);
  auto x_of = [&](double minute) { return kLeft + plot_w * minute / minutes; };
  auto y_of = [&](double value) { return y0 + kTop + plot_h * (1.0 - value / top); };

  std::string svg;
  svg += fmt("<text x=\"%.0f\" y=\"%.1f\" font-size=\"16\">", kLeft, y0 + 28) + escape(title) +
         "</text>\n";
  const int ticks = static_cast<int>(std::lround(top / tick_step));
  for (int tick = 0; tick <= ticks; ++tick) {
    const double value = tick_step * tick;
    const double y = y_of(value);
    svg += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n",
               kLeft, y, kLeft + plot_w, y);
    svg += axis == Axis::kPercent
               ? fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.0f%%</text>\n", kLeft - 6,
                     y + 4, value * 100.0)
               : fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g s</text>\n", kLeft - 6,
                     y + 4, value);
  }
  const double step = minutes > 30 ? 10 : (minutes > 10 ? 5 : 1);
  for (double m = 0; m <= minutes + 1e-9; m += step) {
    svg += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n", x_of(m),
               y0 + kTop + plot_h + 18, m);
  }
  svg +=
      fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
          "stroke=\"black\"/>\n",
          kLeft, y0 + kTop, plot_w, plot_h);
  svg += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">trace time (minutes)</text>\n",
             kLeft + plot_w / 2, y0 + kHeight - 18);
  svg += fmt("<text x=\"18\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 18 %.1f)\">",
             y0 + kTop + plot_h / 2, y0 + kTop + plot_h / 2) +
         escape(y_label) + "</text>\n";
  for (std::size_t i = 0; i < series.size(); ++i) {
    const auto& s = series[i];
    const char* color = kColors[i % std::size(kColors)];
    std::string points;
    auto flush = [&] {
      if (points.empty()) return;
      svg += std::string("<polyline fill=\"none\" stroke-width=\"2\" stroke=\"") + color + "\"" +
             (s.dashed ? " stroke-dasharray=\"6 4\"" : "") + " points=\"" + points + "\"/>\n";
      points.clear();
    };
    for (std::size_t w = 0; w < s.values.size(); ++w) {
      if (std::isnan(s.values[w])) {
        flush();
        continue;
      }
      points += fmt("%.1f,%.1f ", x_of((static_cast<double>(w) + 0.5) * window_minutes),
                    y_of(s.values[w]));
    }
    flush();
    const double ly = y0 + kTop + 20.0 + 22.0 * static_cast<double>(i);
    svg += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke-width=\"2\" ",
               kLeft + plot_w + 15, ly, kLeft + plot_w + 45, ly) +
           "stroke=\"" + color + "\"" + (s.dashed ? " stroke-dasharray=\"6 4\"" : "") + "/>\n";
    svg += fmt("<text x=\"%.1f\" y=\"%.1f\">", kLeft + plot_w + 52, ly + 4) + escape(s.label) +
           "</text>\n";
  }
  return svg;
}

// The per-replica load panel from y = `top`: one group of bars per policy, bar height =
// the replica's requests / the mean, a dashed line at 1.0 (perfect balance).
std::string load_panel(const std::vector<LoadBars>& loads, double top) {
  double y_max = 1.5;
  for (const auto& l : loads) {
    for (double v : l.per_replica) y_max = std::max(y_max, v);
  }
  y_max = std::ceil(y_max * 2.0) / 2.0;  // to the next 0.5
  const double plot_w = kWidth - kLeft - kRight, plot_h = kLoadHeight - 80;
  const double y0 = top + 40;
  auto y_of = [&](double v) { return y0 + plot_h * (1.0 - v / y_max); };
  std::string svg = fmt("<text x=\"%.0f\" y=\"%.1f\" font-size=\"14\">", kLeft, top + 22) +
                    "Requests per replica / mean (1.0 = even load; label: max/mean)</text>\n";
  for (double v = 0; v <= y_max + 1e-9; v += 0.5) {
    svg += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n",
               kLeft, y_of(v), kLeft + plot_w, y_of(v));
    svg += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.1f</text>\n", kLeft - 6,
               y_of(v) + 4, v);
  }
  svg +=
      fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\" "
          "stroke-dasharray=\"4 3\"/>\n",
          kLeft, y_of(1.0), kLeft + plot_w, y_of(1.0));
  const double group_w = plot_w / static_cast<double>(std::max<std::size_t>(loads.size(), 1));
  for (std::size_t g = 0; g < loads.size(); ++g) {
    const auto& l = loads[g];
    const char* color = kColors[g % std::size(kColors)];
    const double gx = kLeft + group_w * static_cast<double>(g);
    const double bar_w =
        (group_w - 20) / static_cast<double>(std::max<std::size_t>(l.per_replica.size(), 1));
    double worst = 0;
    for (std::size_t r = 0; r < l.per_replica.size(); ++r) {
      const double v = l.per_replica[r];
      worst = std::max(worst, v);
      svg += fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" ",
                 gx + 10 + bar_w * static_cast<double>(r), y_of(v), std::max(bar_w - 2, 1.0),
                 y_of(0) - y_of(v)) +
             "fill=\"" + color + "\"/>\n";
    }
    svg +=
        fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", gx + group_w / 2, y_of(0) + 16) +
        escape(l.label) + fmt(" (%.2f)</text>\n", worst);
  }
  return svg;
}

constexpr const char* kHitLabel = "prefix-hit ratio (hit tokens / prompt tokens)";

std::string render_hit_ratio_svg(const std::string& title, const std::vector<Series>& series,
                                 double window_minutes) {
  return svg_open(kHeight) +
         line_panel(title, series, window_minutes, Axis::kPercent, kHitLabel, 0) + "</svg>\n";
}

std::string render_replay_svg(const std::string& title, const std::vector<Series>& series,
                              double window_minutes, const std::vector<LoadBars>& loads) {
  return svg_open(kHeight + kLoadHeight) +
         line_panel(title, series, window_minutes, Axis::kPercent, kHitLabel, 0) +
         load_panel(loads, kHeight) + "</svg>\n";
}

std::string render_replay_svg(const std::string& title, const std::vector<Series>& hits,
                              const std::vector<Series>& ttft, double window_minutes,
                              const std::vector<LoadBars>& loads) {
  return svg_open(2 * kHeight + kLoadHeight) +
         line_panel(title, hits, window_minutes, Axis::kPercent, kHitLabel, 0) +
         line_panel("Mean time to first token of the requests arriving in each window", ttft,
                    window_minutes, Axis::kSeconds, "mean TTFT (queue wait + prefill)", kHeight) +
         load_panel(loads, 2 * kHeight) + "</svg>\n";
}

}  // namespace ic::tools::replay
