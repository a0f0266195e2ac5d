#pragma once
// Internal to src/metrics: appends Prometheus text-format 0.0.4 lines (one
// family header, one sample) to a string. Shared by the renderers of
// prometheus.cc, process.cc and grpc_server_metrics.cc.

#include <charconv>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "metrics/prometheus.hh"

namespace ic::metrics {

// Our own families' name prefix; the standard process and go-grpc-prometheus
// families use an empty prefix so dashboards written for them work unchanged.
inline constexpr std::string_view kPrefix = "inferencecache_";

using Label = std::pair<std::string_view, std::string_view>;

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
