#pragma once
// The exposition lines of a control endpoint's auth outcome counter
// (docs/admin.md "Metrics"), as the tests expect them in /metrics.

#include <cstdint>
#include <string>
#include <utility>

namespace ic::test {

// The four inferencecache_<endpoint>_auth_total lines (ok, unauth, forbidden,
// error) with these counts, in exposition order; `endpoint` is "snapshot" or
// "policy".
inline std::string auth_total_lines(const std::string& endpoint, std::uint64_t ok,
                                    std::uint64_t unauth, std::uint64_t forbidden,
                                    std::uint64_t error) {
  const std::string name = "inferencecache_" + endpoint + "_auth_total{result=\"";
  std::string out;
  for (const auto& [result, n] : {std::pair<const char*, std::uint64_t>{"ok", ok},
                                  {"unauth", unauth},
                                  {"forbidden", forbidden},
                                  {"error", error}}) {
    out += name;
    out += result;
    out += "\"} ";
    out += std::to_string(n);
    out += '\n';
  }
  return out;
}

}  // namespace ic::test
