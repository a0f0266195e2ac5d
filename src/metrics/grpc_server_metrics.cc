#include "metrics/grpc_server_metrics.hh"

#include <algorithm>
#include <array>

#include "metrics/exposition.hh"

namespace ic::metrics {

namespace {

// "/pkg.Service/Method" → {"pkg.Service", "Method"}.
std::pair<std::string_view, std::string_view> split_path(std::string_view path) {
  if (!path.empty() && path.front() == '/') path.remove_prefix(1);
  const std::size_t slash = path.find('/');
  if (slash == std::string_view::npos) return {path, {}};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

template <typename A>
void add(A& into, const A& from) {
  for (std::size_t i = 0; i < into.size(); ++i) into[i] += from[i];
}

}  // namespace

std::string_view to_label(RpcType type) {
  constexpr std::array<std::string_view, 4> kLabels = {"unary", "client_stream", "server_stream",
                                                       "bidi_stream"};
  static_assert(kLabels.size() == static_cast<std::size_t>(RpcType::kBidiStream) + 1);
  return kLabels[static_cast<std::size_t>(type)];
}

std::string_view rpc_code_label(std::size_t code) {
  // google.golang.org/grpc/codes Code.String(), which go-grpc-prometheus uses.
  static constexpr std::array<std::string_view, kRpcCodeCount> kNames = {
      "OK",       "Canceled",       "Unknown",          "InvalidArgument",   "DeadlineExceeded",
      "NotFound", "AlreadyExists",  "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
      "Aborted",  "OutOfRange",     "Unimplemented",    "Internal",          "Unavailable",
      "DataLoss", "Unauthenticated"};
  return code < kNames.size() ? kNames[code] : "Unknown";
}

void RpcSeries::merge(const RpcSeries& other) {
  started += other.started;
  add(handled, other.handled);
  add(buckets, other.buckets);
  count += other.count;
  sum_us += other.sum_us;
}

void RpcSample::merge(const RpcSample& other) {
  for (const auto& [path, series] : other.methods) {
    auto [it, inserted] = methods.try_emplace(path, series);
    if (!inserted) it->second.merge(series);
  }
}

RpcSeries* RpcMetrics::declare(std::string_view path, RpcType type) {
  auto it = series_.find(path);
  if (it == series_.end()) it = series_.try_emplace(std::string(path)).first;
  it->second.type = type;
  return &it->second;
}

RpcSeries* RpcMetrics::find(std::string_view path) {
  const auto it = series_.find(path);
  return it == series_.end() ? nullptr : &it->second;
}

void RpcMetrics::handled(RpcSeries& series, std::size_t code, std::int64_t duration_us) {
  ++series.handled[code < kRpcCodeCount ? code : 2];  // out of range: Unknown
  const std::int64_t us = std::max<std::int64_t>(duration_us, 0);
  const auto bound = std::lower_bound(kRpcBucketsUs.begin(), kRpcBucketsUs.end(), us);
  if (bound != kRpcBucketsUs.end()) ++series.buckets[bound - kRpcBucketsUs.begin()];
  ++series.count;
  series.sum_us += static_cast<std::uint64_t>(us);
}

RpcSample RpcMetrics::copy() const {
  RpcSample sample;
  sample.methods.insert(series_.begin(), series_.end());
  return sample;
}

void render_grpc_server(std::string& out, const RpcSample& sample) {
  Writer w(out, "");
  w.family("grpc_server_started_total", "counter", "Total number of RPCs started on the server.");
  for (const auto& [path, s] : sample.methods) {
    const auto [service, method] = split_path(path);
    w.sample("grpc_server_started_total",
             {{"grpc_method", method}, {"grpc_service", service}, {"grpc_type", to_label(s.type)}},
             s.started);
  }
  w.family("grpc_server_handled_total", "counter",
           "Total number of RPCs completed on the server, regardless of success or failure.");
  for (const auto& [path, s] : sample.methods) {
    const auto [service, method] = split_path(path);
    for (std::size_t code = 0; code < kRpcCodeCount; ++code) {
      w.sample("grpc_server_handled_total",
               {{"grpc_code", rpc_code_label(code)},
                {"grpc_method", method},
                {"grpc_service", service},
                {"grpc_type", to_label(s.type)}},
               s.handled[code]);
    }
  }
  w.family("grpc_server_handling_seconds", "histogram",
           "Histogram of response latency (seconds) of gRPC that had been application-level "
           "handled by the server.");
  for (const auto& [path, s] : sample.methods) {
    const auto [service, method] = split_path(path);
    const std::string_view type = to_label(s.type);
    std::uint64_t cumulative = 0;
    for (std::size_t b = 0; b < kRpcBucketsUs.size(); ++b) {
      cumulative += s.buckets[b];
      const std::string le = format_double(static_cast<double>(kRpcBucketsUs[b]) / 1e6);
      w.sample(
          "grpc_server_handling_seconds",
          {{"grpc_method", method}, {"grpc_service", service}, {"grpc_type", type}, {"le", le}},
          cumulative, "_bucket");
    }
    w.sample(
        "grpc_server_handling_seconds",
        {{"grpc_method", method}, {"grpc_service", service}, {"grpc_type", type}, {"le", "+Inf"}},
        s.count, "_bucket");
    w.sample("grpc_server_handling_seconds",
             {{"grpc_method", method}, {"grpc_service", service}, {"grpc_type", type}},
             static_cast<double>(s.sum_us) / 1e6, "_sum");
    w.sample("grpc_server_handling_seconds",
             {{"grpc_method", method}, {"grpc_service", service}, {"grpc_type", type}}, s.count,
             "_count");
  }
}

}  // namespace ic::metrics
