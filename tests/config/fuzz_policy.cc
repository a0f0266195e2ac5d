// libFuzzer target: arbitrary bytes into the CachePolicy parser (the body of
// POST /policy and --policy-file). It must never crash or throw, and every
// accepted set must satisfy the normalization invariants of docs/policy.md.
//
// Fuzz (clang):
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -I src
//     tests/config/fuzz_policy.cc src/config/policy.cc -o /tmp/fuzz_policy
//   /tmp/fuzz_policy -max_total_time=60
// meson runs it as a regression test over generated inputs (fuzz_policy_replay.cc).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "config/policy.hh"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ic::config;
  const PolicyParseResult r =
      parse_policy_json(std::string_view(reinterpret_cast<const char*>(data), size));
  if (r.ok() == !r.error.empty()) std::abort();  // exactly one of set / error
  if (!r.ok()) return 0;
  for (const auto& [ns, p] : r.set->policies()) {
    if (ns.empty()) std::abort();
    if (p.require_chain && !p.enable_chain_matching) std::abort();
    if (p.routing_floor_score < 0 || p.minimum_matched_tokens < 0 || p.minimum_prefix_tokens < 0 ||
        p.lookup_timeout_ms < 0 || p.eviction_ttl_us < 0)
      std::abort();
    if (&r.set->policy_for(ns) != &p) std::abort();
  }
  for (const auto& [id, q] : r.set->quotas()) {
    if (id.empty() || id == kReservedTenant || q.max_index_entries < 0) std::abort();
  }
  if (r.set->quota_for(kReservedTenant) != nullptr) std::abort();
  return 0;
}
