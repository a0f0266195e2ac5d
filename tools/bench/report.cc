#include "bench/report.hh"

#include <algorithm>
#include <cstdio>

namespace ic::tools::bench {

Summary merge(const RunDescription& run, std::vector<WorkerResult>& results) {
  Summary s;
  s.run = run;
  std::vector<std::uint64_t> samples;
  std::int64_t last_done = run.start_ns;
  for (auto& r : results) {
    s.sent += r.sent;
    s.completed += r.completed;
    s.not_sent += r.not_sent;
    s.unfinished += r.unfinished;
    for (const auto& [k, v] : r.statuses) s.statuses[k] += v;
    for (const auto& [k, v] : r.reasons) s.reasons[k] += v;
    samples.insert(samples.end(), r.latency_us.begin(), r.latency_us.end());
    last_done = std::max(last_done, r.last_done_ns);
  }
  s.ok = s.statuses.contains("OK") ? s.statuses.at("OK") : 0;
  s.elapsed_s = static_cast<double>(last_done - run.start_ns) / 1e9;
  if (s.elapsed_s > 0) {
    s.achieved_qps = static_cast<double>(s.completed) / s.elapsed_s;
    s.ok_qps = static_cast<double>(s.ok) / s.elapsed_s;
  }
  s.histogram = log2_histogram(samples);
  s.latency = summarize(samples);
  return s;
}

std::string render_header(const RunDescription& r) {
  std::string out;
  char line[512];
  auto add = [&](auto... args) {
    std::snprintf(line, sizeof line, args...);
    out += line;
  };
  add("inferencecache-bench: %s %s, %d connections x %d streams, %d thread(s), %.1f s%s\n",
      r.path.c_str(),
      r.rate > 0
          ? ("open loop at " + std::to_string(static_cast<long long>(r.rate)) + " calls/s").c_str()
          : "closed loop",
      r.connections, r.streams, r.threads, r.duration_s, r.interrupted ? " (INTERRUPTED)" : "");
  add("  requests: %s, server %s\n", r.source.c_str(), r.server.c_str());
  return out;
}

std::string render_text(const Summary& s) {
  std::string out = render_header(s.run);
  char line[512];
  auto add = [&](auto... args) {
    std::snprintf(line, sizeof line, args...);
    out += line;
  };
  const auto& r = s.run;
  add("calls: sent %llu, completed %llu, ok %llu, not sent %llu, unfinished %llu\n",
      static_cast<unsigned long long>(s.sent), static_cast<unsigned long long>(s.completed),
      static_cast<unsigned long long>(s.ok), static_cast<unsigned long long>(s.not_sent),
      static_cast<unsigned long long>(s.unfinished));
  add("achieved: %.1f calls/s (%.1f OK/s) over %.3f s\n", s.achieved_qps, s.ok_qps, s.elapsed_s);
  out += "status:";
  for (const auto& [k, v] : s.statuses)
    add(" %s=%llu", k.c_str(), static_cast<unsigned long long>(v));
  out += "\n";
  if (!s.reasons.empty()) {
    out += "reasons:";
    for (const auto& [k, v] : s.reasons)
      add(" %s=%llu", k.c_str(), static_cast<unsigned long long>(v));
    out += "\n";
  }
  const auto& l = s.latency;
  add("latency us (%s): min %llu  mean %llu  p50 %llu  p90 %llu  p99 %llu  p99.9 %llu  max %llu\n",
      r.rate > 0 ? "from the intended send time" : "from the send time",
      static_cast<unsigned long long>(l.min_us), static_cast<unsigned long long>(l.mean_us),
      static_cast<unsigned long long>(l.p50_us), static_cast<unsigned long long>(l.p90_us),
      static_cast<unsigned long long>(l.p99_us), static_cast<unsigned long long>(l.p999_us),
      static_cast<unsigned long long>(l.max_us));
  std::uint64_t peak = 1;
  for (const auto& b : s.histogram) peak = std::max(peak, b.count);
  for (const auto& b : s.histogram) {
    const int bar = static_cast<int>(40 * b.count / peak);
    add("  %8llu - %-8llu us  %-40s %llu\n", static_cast<unsigned long long>(b.lower_us),
        static_cast<unsigned long long>(b.upper_us),
        std::string(static_cast<std::size_t>(bar), '#').c_str(),
        static_cast<unsigned long long>(b.count));
  }
  return out;
}

nlohmann::json render_json(const Summary& s) {
  nlohmann::json doc = s;
  doc["schema"] = "inferencecache-bench/v1";
  doc["config"] = s.run;
  doc["config"]["mode"] = s.run.rate > 0 ? "open-loop" : "closed-loop";
  doc["interrupted"] = s.run.interrupted;
  return doc;
}

}  // namespace ic::tools::bench
