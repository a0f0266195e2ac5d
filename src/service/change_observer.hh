#pragma once
// Sees every change the InferenceCache service accepts, on the accepting core
// (the replication module appends them to its stream: docs/replication.md).
// Called before the change is applied or posted to its owner core, so the
// observer may stamp a zero timestamp_us with the accepting time: the local
// apply and every replica then record the same last_seen.

#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::service {

class ChangeObserver {
 public:
  virtual ~ChangeObserver() = default;
  // One parsed ReportCacheState message. Must never block (reactor thread).
  virtual void accepted(::inferencecache::v1alpha1::CacheStateUpdate& update) = 0;
  // One parsed PublishEvent. Must never block (reactor thread).
  virtual void accepted(::inferencecache::v1alpha1::CacheEvent& event) = 0;
};

}  // namespace ic::service
