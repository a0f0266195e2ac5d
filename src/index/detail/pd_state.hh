#pragma once
// LookupPDRoute's state in a shard (pd_route.cc, docs/pd-routing.md): the
// topologies of the policy set in force with their replicas as interned ids,
// and the scratch of one call.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "config/pd_topology.hh"
#include "index/detail/interner.hh"
#include "index/query.hh"

namespace ic::index::detail {

// One topology with its pools' replica ids (each holds an interner reference
// while its policy set is installed: Shard::set_policies resolves them).
struct PdPools {
  const config::PdTopology* topology = nullptr;  // lives in Shard::Impl::policies
  std::vector<std::uint32_t> prefill;            // parallel to topology->prefill
  std::vector<std::uint32_t> decode;             // parallel to topology->decode
};

using PdPoolMap = std::unordered_map<std::string, PdPools, config::StringHash, std::equal_to<>>;

// One decode replica of a LookupPDRoute call.
struct DecodeCand {
  std::uint32_t pool_index;  // into topology->decode / PdPools::decode
  std::uint32_t replica;
  std::int64_t held;         // prompt tokens it holds (stored or booked), unweighted
  double load;               // its decodes over its slots: see gather_decode_candidates
  double wait_us;            // its own prefill of the rest: the work-aware wait (add_work_cand)
  double running;            // decodes it runs or is booked to run, as load × slots
  bool saturated;            // its fresh reported pressure ≥ saturationPressure
  bool full;                 // saturated, or its decodes fill its slots (load ≥ 1)
  std::int64_t reported_at;  // wall µs of its fresh stats; INT64_MIN = none
  std::uint32_t pending;     // its open decode bookings starting after reported_at
  std::uint32_t started;     // those of them whose estimated start has passed
  double stalled;            // decodes running now: reported, or pending and started by now
};

// The scratch of LookupPDRoute (reused per call).
struct PdScratch {
  PdPoolMap pd_pools;
  // The replicas in a decode pool and in no prefill pool, sorted, unique:
  // their pressure counts the decodes they run, not a prefill queue
  // (ingest.cc ingest_stats, bookings.cc displace).
  std::vector<std::uint32_t> pd_decode_replicas;
  std::vector<DecodeCand> decode_cands;
  std::vector<std::uint32_t> prefill_pool_index;  // parallel to work_cands in a call
  LookupResult pd_steps_out;                      // the LookupRoute steps' fail-open answers
};

}  // namespace ic::index::detail
