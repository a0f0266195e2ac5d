// The replay's view of the InferenceCache server, behind an interface so the replay loop can be
// unit-tested without a server.
#pragma once

#include <cstdint>
#include <string>

#include "inferencecache/v1alpha1/inferencecache.pb.h"

namespace ic::tools::replay {

// One LookupRoute as the client saw it.
struct LookupCall {
  bool ok = false;               // gRPC status OK
  std::string status;            // "OK" or the gRPC status name (e.g. "UNAVAILABLE")
  std::uint64_t latency_us = 0;  // wall time around the call, client side
};

class IndexClient {
 public:
  virtual ~IndexClient() = default;

  // The replay's time line reached trace time `trace_ms`: called before the calls of each event
  // (arrival, prefill end, stats tick), in time order. An index that keeps its own clock (a
  // server: the wall clock) ignores it; the in-process one (in_process_index_client.hh) sets its
  // clock to it.
  virtual void at(double /*trace_ms*/) {}

  // Unary LookupRoute; fills *response when ok.
  virtual LookupCall lookup(const inferencecache::v1alpha1::LookupRouteRequest& request,
                            inferencecache::v1alpha1::LookupRouteResponse* response) = 0;

  // Unary LookupPDRoute (P/D mode); fills *response when ok. Without a server: never ok.
  virtual LookupCall lookup_pd(const inferencecache::v1alpha1::LookupPDRouteRequest&,
                               inferencecache::v1alpha1::LookupPDRouteResponse*) {
    return {false, "OFFLINE", 0};
  }

  // Writes `update` on the long-lived ReportCacheState stream `stream` (one per simulated
  // replica and policy; opened on first use). False (and *error) when the stream broke.
  virtual bool report(std::size_t stream, const inferencecache::v1alpha1::CacheStateUpdate& update,
                      std::string* error) = 0;

  // Sends a PublishEvent without waiting for its Ack (pipelined, bounded in flight).
  virtual void publish(const inferencecache::v1alpha1::CacheEvent& event) = 0;

  // Half-closes every stream, waits for their Acks and every event's; false (and *error naming
  // the first failure) if any was not accepted.
  virtual bool finish(std::string* error) = 0;

  // Events whose call failed so far.
  virtual std::int64_t failed_events() const = 0;
};

// The client of a replay in which no policy asks the server: every call succeeds and does
// nothing (LookupRoute answers an empty response with status "OFFLINE", never ok).
class OfflineIndexClient final : public IndexClient {
 public:
  LookupCall lookup(const inferencecache::v1alpha1::LookupRouteRequest&,
                    inferencecache::v1alpha1::LookupRouteResponse*) override {
    return {false, "OFFLINE", 0};
  }
  bool report(std::size_t, const inferencecache::v1alpha1::CacheStateUpdate&,
              std::string*) override {
    return true;
  }
  void publish(const inferencecache::v1alpha1::CacheEvent&) override {}
  bool finish(std::string*) override { return true; }
  std::int64_t failed_events() const override { return 0; }
};

}  // namespace ic::tools::replay
