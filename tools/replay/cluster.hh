// The simulated engine cluster: N prefill replicas, each a FIFO server with its own prefill rate
// and an LRU KV cache, on TRACE time (ms from the trace's start). The replay loop drives it with
// arrivals and prefill ends in time order; whether that time line is also paced on the wall clock
// is the loop's business, not the cluster's.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/trace.hh"
#include "replay/lru_cache.hh"

namespace ic::tools::replay {

// One request waiting for, or in, its prefill on a replica.
struct Job {
  std::size_t request = 0;              // index of the request in the trace
  const TraceRequest* trace = nullptr;  // never null; outlives the job
  double arrival_ms = 0;                // trace time the request reached the replica
  std::int64_t expected_uncached = 0;   // tokens, as Cluster::expected_hit_tokens saw them then
};

// A prefill that ended. TTFT = queue wait + prefill = end_ms − arrival_ms (decode not modelled:
// these are prefill replicas).
struct Finished {
  std::size_t replica = 0;
  std::size_t request = 0;
  double arrival_ms = 0;               // trace time
  double start_ms = 0;                 // when the prefill started (the cache was checked then)
  double end_ms = 0;                   // when the first token is out; KV events leave now
  std::int64_t hit_tokens = 0;         // tokens of the leading cached blocks at start_ms
  std::int64_t prompt_tokens = 0;      // input_length
  std::vector<std::uint64_t> evicted;  // hash ids the LRU dropped while storing the request
  // Time to first token, ms.
  double ttft_ms() const { return end_ms - arrival_ms; }
};

class Cluster {
 public:
  // `rates` prefill tokens per second, one per replica (each > 0); `capacity_blocks` KV blocks
  // of 512 tokens per replica (>= 1).
  Cluster(std::vector<double> rates, std::size_t capacity_blocks);

  // Number of replicas.
  std::size_t size() const { return replicas_.size(); }

  // Queues request `request` (index `index`) on `replica` at trace time now_ms. When the replica
  // was idle its prefill starts at once and the end time (ms) is returned; nullopt: it waits.
  std::optional<double> enqueue(std::size_t replica, std::size_t index, const TraceRequest& request,
                                double now_ms);

  // Ends the running prefill of `replica` (at its end time): its blocks are stored in the LRU,
  // and the next queued request starts (*next_end = its end time, or nullopt when none waits).
  // Precondition: a prefill is running there.
  Finished finish(std::size_t replica, std::optional<double>* next_end);

  // Stores `request`'s blocks in `replica`'s cache without a prefill (KV that arrived from
  // another replica, P/D mode); returns the blocks the LRU evicted.
  std::vector<std::uint64_t> store(std::size_t replica, const TraceRequest& request);

  // Prefill rate of `replica`, tokens/s.
  double rate(std::size_t replica) const { return replicas_[replica].rate; }
  // Requests queued or in prefill on `replica`.
  std::size_t outstanding(std::size_t replica) const;
  // What a balancer without cache knowledge sees at now_ms: the prompt tokens still to prefill on
  // `replica` as if nothing were cached (queued prompts whole, the running prompt less what its
  // rate has done since it started) / its rate, ms.
  double outstanding_prompt_ms(std::size_t replica, double now_ms) const;
  // What a router with full knowledge sees: the time until `replica` is free at now_ms = the
  // running prefill's remaining time + each queued request's expected uncached tokens / rate, ms.
  double expected_wait_ms(std::size_t replica, double now_ms) const;
  // Tokens of the leading run of `request`'s blocks that are cached on `replica` or will be by
  // the time it starts (stored by a request queued or running there), partial last block with its
  // real size.
  std::int64_t expected_hit_tokens(std::size_t replica, const TraceRequest& request) const;

  // min(1, outstanding / slots): the pressure an engine adapter reports ((running + waiting) /
  // ceiling, docs/kvevents.md).
  float pressure(std::size_t replica, int slots) const;
  // Requests routed to `replica` so far (queued ones included).
  std::int64_t routed(std::size_t replica) const { return replicas_[replica].routed; }
  // Cumulative hit tokens / prompt tokens of `replica`'s finished prefills (0 before the first).
  float hit_rate(std::size_t replica) const;
  // KV blocks in `replica`'s cache now.
  std::size_t cached_blocks(std::size_t replica) const { return replicas_[replica].cache.size(); }

 private:
  struct Replica {
    Replica(double r, std::size_t capacity) : rate(r), cache(capacity) {}
    double rate;  // tokens/s
    LruBlockCache cache;
    std::deque<Job> waiting;
    std::optional<Job> running;
    double running_start_ms = 0;
    double running_end_ms = 0;
    std::int64_t running_hit_tokens = 0;
    std::int64_t waiting_prompt_tokens = 0;                 // Σ input_length of `waiting`
    std::unordered_map<std::uint64_t, int> pending_blocks;  // blocks of waiting + running jobs
    std::int64_t routed = 0;
    std::int64_t hit_tokens = 0;
    std::int64_t prompt_tokens = 0;
  };
  double start_next(Replica& r);
  std::int64_t leading_tokens(const Replica& r, const TraceRequest& request,
                              bool count_pending) const;

  std::vector<Replica> replicas_;
};

// Prefill time of `tokens` at `rate` tokens/s, ms.
inline double prefill_ms(std::int64_t tokens, double rate) {
  return static_cast<double>(tokens) * 1000.0 / rate;
}

// Replica names on the wire: "replica-0" … "replica-(N−1)".
std::string replica_id(std::size_t index);

}  // namespace ic::tools::replay
