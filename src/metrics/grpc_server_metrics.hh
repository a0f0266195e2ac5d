#pragma once
// go-grpc-prometheus-style per-RPC metrics
// (github.com/grpc-ecosystem/go-grpc-prometheus, server side), so the
// dashboards and alerts operators already run against gRPC services work:
//   grpc_server_started_total{grpc_type,grpc_service,grpc_method}
//   grpc_server_handled_total{grpc_type,grpc_service,grpc_method,grpc_code}
//   grpc_server_handling_seconds{grpc_type,grpc_service,grpc_method} histogram
// Like go-grpc-prometheus, every registered method is pre-initialised (all
// codes at 0) so rate() has a series from the first scrape, and a call whose
// stream is reset before the server answered counts as CANCELLED.
//
// One RpcMetrics per core, written only by that core with plain counters
// (no locks, no atomics); a scrape copies each core's RpcSample and sums them.

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>

namespace ic::metrics {

// {grpc_type}: "unary", "client_stream", "server_stream", "bidi_stream".
enum class RpcType : std::uint8_t { kUnary, kClientStream, kServerStream, kBidiStream };
std::string_view to_label(RpcType type);

// gRPC status codes 0..16 (grpc/doc/statuscodes.md); {grpc_code} is the
// canonical CamelCase name go-grpc-prometheus uses ("OK", "Canceled", ...).
inline constexpr std::size_t kRpcCodeCount = 17;
std::string_view rpc_code_label(std::size_t code);

// Upper bounds (µs, inclusive) of grpc_server_handling_seconds: finer than
// the Prometheus default buckets at the low end (a LookupRoute takes µs),
// the same 0.005 .. 10 s above. +Inf is the series' count.
inline constexpr std::array<std::int64_t, 17> kRpcBucketsUs = {
    50,    100,    250,    500,    1000,    2500,    5000,    10000,   25000,
    50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000};

// One method's counters on one core (or summed over all).
struct RpcSeries {
  RpcType type = RpcType::kUnary;
  std::uint64_t started = 0;
  std::array<std::uint64_t, kRpcCodeCount> handled{};
  // Non-cumulative: buckets[i] counts durations in (bound[i-1], bound[i]].
  std::array<std::uint64_t, kRpcBucketsUs.size()> buckets{};
  std::uint64_t count = 0;   // handled calls (the +Inf bucket)
  std::uint64_t sum_us = 0;  // total handling time, µs

  void merge(const RpcSeries& other);
};

// Every method's series keyed by ":path" ("/pkg.Service/Method"), sorted.
struct RpcSample {
  std::map<std::string, RpcSeries, std::less<>> methods;
  void merge(const RpcSample& other);
};

class RpcMetrics {
 public:
  // Creates (at 0) the series of method `path`; returns it. Paths come from
  // the server's method table, so the map is bounded by the methods we serve.
  RpcSeries* declare(std::string_view path, RpcType type);
  // The series of a declared method, or nullptr.
  RpcSeries* find(std::string_view path);

  // A call of `series` began.
  static void started(RpcSeries& series) { ++series.started; }
  // A call of `series` ended with gRPC status `code` after `duration_us`.
  static void handled(RpcSeries& series, std::size_t code, std::int64_t duration_us);

  RpcSample copy() const;

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  std::unordered_map<std::string, RpcSeries, Hash, std::equal_to<>> series_;
};

// Appends the three families (unprefixed) to `out`; series sorted by path.
void render_grpc_server(std::string& out, const RpcSample& sample);

}  // namespace ic::metrics
