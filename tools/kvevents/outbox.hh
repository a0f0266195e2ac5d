// The boundary between the event side (subscriber thread) and the server side (sender thread):
// ordered messages for the InferenceCache server.
#pragma once

#include <cstddef>
#include <variant>

#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::tools::kvevents {

// A CacheStateUpdate goes on the ReportCacheState stream; a CacheEvent is one PublishEvent call.
using Outbound =
    std::variant<inferencecache::v1alpha1::CacheStateUpdate, inferencecache::v1alpha1::CacheEvent>;

class Outbox {
 public:
  virtual ~Outbox() = default;
  // Queues `message` after everything pushed before. `entries` is its weight against the queue
  // bound (prefix entries, at least 1). May block while the queue is full (backpressure).
  virtual void push(Outbound message, std::size_t entries) = 0;
};

}  // namespace ic::tools::kvevents
