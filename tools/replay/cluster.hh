// The simulated engine cluster: N replicas, each with an LRU KV cache and an in-flight queue
// driven by TRACE time (not wall time), so results do not depend on replay speed.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <vector>

#include "common/trace.hh"
#include "replay/lru_cache.hh"

namespace ic::tools::replay {

// How long a request occupies its replica, and when a replica counts as saturated.
// service_ms = (prompt tokens − hit tokens) / prefill_tokens_per_ms + output tokens ×
// decode_ms_per_token: a cache hit shortens prefill, which is why hits matter for load.
struct EngineModel {
  double prefill_tokens_per_ms = 10.0;  // 10,000 prompt tokens/s per replica
  double decode_ms_per_token = 20.0;    // 50 output tokens/s per request
  int slots = 16;                       // concurrent requests at pressure 1.0
};

// Outcome of serving one request on one replica.
struct Served {
  std::size_t replica = 0;
  std::int64_t hit_tokens = 0;         // tokens of the leading cached blocks
  std::int64_t prompt_tokens = 0;      // input_length
  std::vector<std::uint64_t> evicted;  // hash ids the LRU dropped while storing the request
};

class Cluster {
 public:
  Cluster(std::size_t replicas, std::size_t capacity_blocks, EngineModel model);

  // Number of replicas.
  std::size_t size() const { return replicas_.size(); }

  // Requests still running on `replica` at trace time now_ms (finished ones are retired).
  int in_flight(std::size_t replica, std::int64_t now_ms);
  // in_flight / slots, clamped to [0, 1]: the pressure an engine adapter would report.
  float pressure(std::size_t replica, std::int64_t now_ms);
  // Fewest in-flight requests, then fewest served, then lowest index (deterministic).
  std::size_t least_loaded(std::int64_t now_ms);

  // Serves `request` on `replica` at its trace timestamp: prefix hit from the cache, then store
  // its blocks (LRU) and occupy the replica for the modelled service time.
  Served serve(std::size_t replica, const TraceRequest& request);

  // Leading blocks of `request` cached on `replica` now (what serving it would hit).
  std::size_t leading_hits(std::size_t replica, const TraceRequest& request) const {
    return replicas_[replica].cache.leading_hits(request.hash_ids);
  }
  // Requests `replica` has served so far.
  std::int64_t served(std::size_t replica) const { return replicas_[replica].served; }
  // Cumulative hit tokens / prompt tokens of `replica` (0 before its first request).
  float hit_rate(std::size_t replica) const;
  // KV blocks in `replica`'s cache now.
  std::size_t cached_blocks(std::size_t replica) const { return replicas_[replica].cache.size(); }

 private:
  struct Replica {
    explicit Replica(std::size_t capacity) : cache(capacity) {}
    LruBlockCache cache;
    std::priority_queue<double, std::vector<double>, std::greater<>> ends_ms;
    std::int64_t served = 0;
    std::int64_t hit_tokens = 0;
    std::int64_t prompt_tokens = 0;
  };
  EngineModel model_;
  std::vector<Replica> replicas_;
};

// Replica names on the wire: "replica-0" … "replica-(N−1)".
std::string replica_id(std::size_t index);

}  // namespace ic::tools::replay
