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

// The hit-ratio panel (everything but the <svg> element), kHeight tall.
std::string hit_ratio_panel(const std::string& title, const std::vector<Series>& series,
                            double window_minutes) {
  std::size_t windows = 0;
  double top = 0.1;
  for (const auto& s : series) {
    windows = std::max(windows, s.values.size());
    for (double v : s.values) {
      if (!std::isnan(v)) top = std::max(top, v);
    }
  }
  top = std::ceil(top * 10.0) / 10.0;  // y axis to the next 10 %
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  const double minutes = std::max(1.0, static_cast<double>(windows) * window_minutes);
  auto x_of = [&](double minute) { return kLeft + plot_w * minute / minutes; };
  auto y_of = [&](double ratio) { return kTop + plot_h * (1.0 - ratio / top); };

  std::string svg;
  svg += fmt("<text x=\"%.0f\" y=\"28\" font-size=\"16\">", kLeft) + escape(title) + "</text>\n";
  const double tick_step = top <= 0.3 ? 0.05 : 0.1;  // round percentages on the y axis
  const int ticks = static_cast<int>(std::lround(top / tick_step));
  for (int tick = 0; tick <= ticks; ++tick) {
    const double ratio = tick_step * tick;
    const double y = y_of(ratio);
    svg += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n",
               kLeft, y, kLeft + plot_w, y);
    svg += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.0f%%</text>\n", kLeft - 6, y + 4,
               ratio * 100.0);
  }
  const double step = minutes > 30 ? 10 : (minutes > 10 ? 5 : 1);
  for (double m = 0; m <= minutes + 1e-9; m += step) {
    svg += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n", x_of(m),
               kTop + plot_h + 18, m);
  }
  svg +=
      fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
          "stroke=\"black\"/>\n",
          kLeft, kTop, plot_w, plot_h);
  svg += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">trace time (minutes)</text>\n",
             kLeft + plot_w / 2, kHeight - 18);
  svg +=
      fmt("<text x=\"18\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 18 %.1f)\">"
          "prefix-hit ratio (hit tokens / prompt tokens)</text>\n",
          kTop + plot_h / 2, kTop + plot_h / 2);
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
    const double ly = kTop + 20.0 + 22.0 * static_cast<double>(i);
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

std::string render_hit_ratio_svg(const std::string& title, const std::vector<Series>& series,
                                 double window_minutes) {
  return svg_open(kHeight) + hit_ratio_panel(title, series, window_minutes) + "</svg>\n";
}

std::string render_replay_svg(const std::string& title, const std::vector<Series>& series,
                              double window_minutes, const std::vector<LoadBars>& loads) {
  return svg_open(kHeight + kLoadHeight) + hit_ratio_panel(title, series, window_minutes) +
         load_panel(loads, kHeight) + "</svg>\n";
}

}  // namespace ic::tools::replay
