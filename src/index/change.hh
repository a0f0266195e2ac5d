#pragma once
// What a Shard reports after each change it applies, for the StreamCacheEvents
// fan-out (docs/streams.md "Event types"). The shard calls its ChangeSink, if
// one is set, synchronously on its own core; with no sink set (no subscriber)
// each emission point costs one predictable branch.

#include <cstdint>
#include <string_view>

namespace ic::index {

// Same numbers as inferencecache.v1alpha1.CacheEvent.Type; also the type of
// a published Event (index/update.hh), where any other type is kUnspecified.
enum class ChangeType : std::uint8_t {
  kUnspecified = 0,     // events only: an unknown or unset type (a no-op)
  kPrefixAdded = 1,     // a (key, replica) entry was added or refreshed by ingest
  kPrefixEvicted = 2,   // a (key, replica) entry was removed: event, TTL, cap or quota
  kReplicaUpdated = 3,  // a replica's stats were stored, or its liveness refreshed
  kAllCleared = 4,      // ALL_CLEARED removed a replica from (tenant, model)
};

// One applied change. The views point into the shard and are valid only
// during ChangeSink::on_change.
struct Change {
  ChangeType type = ChangeType::kPrefixAdded;
  std::string_view tenant_id;
  std::string_view model_id;
  std::string_view replica_id;
  std::string_view adapter_id;   // the key's adapter partition (prefix changes only)
  std::string_view prefix_hash;  // the key's hash bytes (prefix changes only)
  // Wall µs: the stored last_seen for kPrefixAdded / kReplicaUpdated; 0 for
  // removals (the sink stamps its own wall clock: the time of applying).
  std::int64_t timestamp_us = 0;
};

// Receives a shard's changes on the shard's core. Must not call back into
// the shard.
class ChangeSink {
 public:
  virtual ~ChangeSink() = default;
  virtual void on_change(const Change& change) = 0;
};

}  // namespace ic::index
