#pragma once
// Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/): every family
// gets "# HELP" and "# TYPE" lines, families in a fixed order, series sorted by
// label values, label values escaped (\\, \", \n). Served with
// Content-Type: text/plain; version=0.0.4; charset=utf-8.

#include <string>
#include <string_view>

#include "metrics/exposition.hh"  // append_label_value, format_double
#include "metrics/group.hh"
#include "metrics/sample.hh"

namespace ic::metrics {

inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// Renders the merged sample and process figures: the docs/admin.md families
// plus the operator ones (build_info, process RSS and start time, ingest,
// events, connections, streams, HTTP requests, policy reloads, per-core
// lookups, cross-core posts/drops, mailbox depth, shard entries), and what
// the subsystems registered (`registered`: their groups after the process
// families, their per-core counter families after the connection ones).
// Dynamic labels (model, tenant_id) sorted bytewise, fixed labels in enum
// order; lookup call series with a zero count are omitted. Deterministic:
// equal inputs give equal bytes.
std::string render_prometheus(const Sample& sample, const ProcessFigures& process,
                              const Registrations& registered = {});

}  // namespace ic::metrics
