#pragma once
// Sees every change the InferenceCache service accepts, on the accepting core
// (the replication module appends them to its stream: docs/replication.md).
// Called before the change is applied or posted to its owner core, so the
// observer may stamp a zero timestamp_us with the accepting time: the local
// apply and every replica then record the same last_seen.

#include <cstdint>
#include <string_view>

#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::sharding {

class ChangeObserver {
 public:
  virtual ~ChangeObserver() = default;
  // One parsed ReportCacheState message. Must never block (reactor thread).
  // Returns the change's replication sequence, handed to early_apply() on
  // the owner core; 0 = not replicated (nothing to ask).
  virtual std::uint64_t accepted(::inferencecache::v1alpha1::CacheStateUpdate& update) = 0;
  // One parsed PublishEvent; the same contract.
  virtual std::uint64_t accepted(::inferencecache::v1alpha1::CacheEvent& event) = 0;
  // On owner core `core`, just before the change `sequence` (> 0, from
  // accepted()) of `tenant_id` is applied there. False: don't apply it, its
  // copy from the stream ran first (docs/replication.md "Applying the
  // stream"). Must never block.
  virtual bool early_apply(unsigned core, std::string_view tenant_id, std::uint64_t sequence) = 0;
};

}  // namespace ic::sharding
