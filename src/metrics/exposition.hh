#pragma once
// Writing the Prometheus text format 0.0.4: whole lines (one family header,
// one sample) appended to a string. Header-only, so the kvevents adapter's
// own /metrics (tools/kvevents/counters.cc) is written by the same code as
// the server's (prometheus.cc, process.cc, grpc_server_metrics.cc) without
// linking the metrics library. The reader is metrics/label_value.hh.

#include <charconv>
#include <cmath>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace ic::metrics {

// Our own families' name prefix; the standard process and go-grpc-prometheus
// families use an empty prefix so dashboards written for them work unchanged.
inline constexpr std::string_view kPrefix = "inferencecache_";

using Label = std::pair<std::string_view, std::string_view>;

// Appends `value` escaped as a Prometheus label value (without quotes).
inline void append_label_value(std::string& out, std::string_view value) {
  for (char ch : value) {
    switch (ch) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += ch;
    }
  }
}

// Formats a double the way Prometheus parses it: shortest round-trip digits
// in %g style ("0.0001", "1e-05", "0.200041"), "+Inf", "-Inf", "NaN".
inline std::string format_double(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Shortest round-trip digits in %g style, so bucket bounds read "0.0001"
  // like other exporters' (plain shortest would give "1e-04").
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::general);
  return std::string(buf, static_cast<std::size_t>(end - buf));
}

// Builds one exposition; each method appends whole lines.
class Writer {
 public:
  explicit Writer(std::string& out, std::string_view prefix = kPrefix)
      : out_(out), prefix_(prefix) {}

  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    name_line(name);
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    name_line(name);
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }

  // One unlabelled family and its only sample: `type` is "gauge" or "counter".
  template <typename N>
  void single(std::string_view name, std::string_view type, std::string_view help, N value) {
    family(name, type, help);
    sample(name, {}, value);
  }

  template <typename N>
  void sample(std::string_view name, std::initializer_list<Label> labels, N value,
              std::string_view suffix = {}) {
    name_line(name);
    out_ += suffix;
    if (labels.size() > 0) {
      out_ += '{';
      bool first = true;
      for (const auto& [key, val] : labels) {
        if (!first) out_ += ',';
        first = false;
        out_ += key;
        out_ += "=\"";
        append_label_value(out_, val);
        out_ += '"';
      }
      out_ += '}';
    }
    out_ += ' ';
    if constexpr (std::is_floating_point_v<N>) {
      out_ += format_double(value);
    } else {
      char buf[24];
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
      out_ += std::string_view(buf, static_cast<std::size_t>(end - buf));
    }
    out_ += '\n';
  }

 private:
  void name_line(std::string_view name) {
    out_ += prefix_;
    out_ += name;
  }
  std::string& out_;
  std::string_view prefix_;
};

}  // namespace ic::metrics
