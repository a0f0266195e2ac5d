#pragma once
// Decides, on one core, whether this server's own record coming back from
// the stream (its echo) must be applied again (docs/replication.md "Applying
// the stream", the echo rule). The origin applies a change as soon as it
// accepts it (the early apply) and meets it again at its place in the stream.
// Re-applying it there is what makes every server fold the changes in stream
// order; it is needed only when the early apply was not already in stream
// order. The echo of record R is skipped when both hold:
//   - no stream record of R's tenant (nor a policy, which touches every
//     tenant) ran on this core between R's early apply and its echo: R's
//     state then sits on top of the same stream prefix as at every other
//     server;
//   - R itself is clean: its echo did not overtake an own record of the same
//     tenant applied early before R (stream order R, P but local order P, R):
//     skipping R marks every such earlier P dirty, so P is applied again at
//     its own place after R.
// Any other record is applied, and an applied one marks every own record of
// its tenant still waiting for its echo dirty. Under the index's per-(key,
// replica) last-writer-wins (each change writes the same values whenever it
// is applied, timestamps stamped at the origin) every key ends with the value
// of the last stream record that touched it, as at a server that applied the
// stream in order (the proof is in the doc section).
//
// An echo that arrives before its early apply ran (the owner core's mailbox
// was slower than the round trip through NATS, or the early apply was shed)
// is applied at its place, and the late early apply is then dropped: applying
// it after later stream records would put it out of order.
//
// One instance per core, used only on that core. Bounded: at most
// kMaxWaiting records waiting for their echo (~64 bytes each: 16 MiB) and
// kMaxEarlyEchoes early echoes; over a bound the set is forgotten. A
// forgotten waiting record is safe (its echo is applied, as without this
// filter); a forgotten early echo matters only if its early apply is later
// still than kMaxEarlyEchoes other early echoes (the set fills with the
// echoes of shed early applies, which never come). 2^18 covers the
// echoes a loaded origin is behind at 100,000 changes/s
// (perf/replication_lag); more wait only while NATS is slow or away, when
// re-applying their echoes later costs nothing that matters.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace ic::replication {

class EchoFilter {
 public:
  // Bounds (records); over one the set is cleared (see above).
  static constexpr std::size_t kMaxWaiting = std::size_t{1} << 18;
  static constexpr std::size_t kMaxEarlyEchoes = 4096;

  // Own record `sequence` (its origin_sequence, > 0) of `tenant` is about to
  // be applied early on this core. False: don't, its echo ran already.
  bool early_apply(std::string_view tenant, std::uint64_t sequence);
  // A stream record of `tenant` is next in stream order on this core;
  // `own_sequence` = its origin_sequence when this server is its origin,
  // else 0. True: apply it; false: skip it (its early apply stands).
  bool stream_record(std::string_view tenant, std::uint64_t own_sequence);
  // A stream record that touches every tenant (a policy) ran on this core.
  void stream_all() { ++all_applies_; }

  // Own records waiting for their echo; early echoes remembered.
  std::size_t waiting() const { return waiting_.size(); }
  std::size_t early_echoes() const { return early_echoes_.size(); }

 private:
  struct Tenant {
    std::uint64_t applies = 0;      // stream records of the tenant applied
    std::uint64_t dirty_below = 0;  // waiting records with local order below are dirty
    std::size_t waiting = 0;        // records of the tenant waiting for their echo
  };
  // Heterogeneous lookup: a tenant_id view finds its entry without a copy.
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Tenants = std::unordered_map<std::string, Tenant, Hash, std::equal_to<>>;
  struct Waiting {
    Tenants::value_type* tenant = nullptr;  // node of tenants_ (stable address)
    std::uint64_t order = 0;                // local apply order on this core
    std::uint64_t applies = 0;              // tenant->applies at the early apply
    std::uint64_t all_applies = 0;          // all_applies_ at the early apply
  };
  bool clean(const Waiting& w) const;
  void forget(std::unordered_map<std::uint64_t, Waiting>::iterator it);
  void applied(std::string_view tenant);

  Tenants tenants_;                                     // tenants with waiting records
  std::unordered_map<std::uint64_t, Waiting> waiting_;  // by origin_sequence
  std::unordered_set<std::uint64_t> early_echoes_;      // echoes applied before their early apply
  std::uint64_t next_order_ = 1;
  std::uint64_t all_applies_ = 0;
};

}  // namespace ic::replication
