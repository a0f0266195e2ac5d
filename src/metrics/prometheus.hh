#pragma once
// Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/): every family
// gets "# HELP" and "# TYPE" lines, families in a fixed order, series sorted by
// label values, label values escaped (\\, \", \n). Served with
// Content-Type: text/plain; version=0.0.4; charset=utf-8.

#include <string>
#include <string_view>

#include "metrics/sample.hh"

namespace ic::metrics {

inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// Renders the merged sample and process figures (spec/admin.md "Metrics" plus
// the operator metrics listed in src/metrics/README-style comments in
// prometheus.cc). Deterministic: equal inputs give equal bytes.
std::string render_prometheus(const Sample& sample, const ProcessFigures& process);

// Appends `value` escaped as a Prometheus label value (without quotes).
void append_label_value(std::string& out, std::string_view value);

// Formats a double the way Prometheus parses it: shortest round-trip
// representation, "+Inf", "-Inf", "NaN".
std::string format_double(double value);

}  // namespace ic::metrics
