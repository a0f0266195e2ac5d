#pragma once
// The shared conversation trace ($IC_SHARED_DATA/traces/mooncake_fast25_conversation_trace.jsonl,
// set by meson for the tools tests) as the replay tests load it: its first `limit` requests,
// every line required to parse (a doctest REQUIRE fails the test otherwise).

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/trace.hh"

namespace ic::tools::test {

inline std::vector<TraceRequest> shared_trace_requests(std::int64_t limit) {
  const char* dir = std::getenv("IC_SHARED_DATA");
  REQUIRE(dir != nullptr);
  auto load = load_trace(std::string(dir) + "/traces/mooncake_fast25_conversation_trace.jsonl",
                         BadLinePolicy::kFail, limit, [](const std::string&) {});
  REQUIRE(load.error.empty());
  return load.requests;
}

}  // namespace ic::tools::test
