// One bench thread: an epoll loop driving a group of H2Connections, issuing calls on an
// open-loop schedule (latency from the INTENDED send time, so a slow server cannot hide its
// queueing: no coordinated omission) or at fixed concurrency (closed loop).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/h2_connection.hh"
#include "bench/workload.hh"

namespace ic::tools::bench {

// What one worker thread does.
struct WorkerPlan {
  double rate_per_s = 0;                  // this worker's share of the target rate; 0 = closed loop
  int streams = 16;                       // concurrent streams per connection
  std::int64_t start_ns = 0;              // first intended send (monotonic)
  std::int64_t end_ns = 0;                // no call is intended at or after this
  std::int64_t drain_ns = 2'000'000'000;  // wait this long after end_ns for answers
  std::size_t order_offset = 0;           // where this worker starts in Workload::order
  bool decode_reasons = true;             // parse LookupRouteResponse.reason_code of OK answers
  std::size_t max_backlog = 1'000'000;    // intended calls waiting for a free stream, at most
};

// What one worker thread measured (merged by report.hh).
struct WorkerResult {
  std::vector<std::uint64_t> latency_us;          // one per completed call
  std::map<std::string, std::uint64_t> statuses;  // "OK", gRPC status names, transport errors
  std::map<std::string, std::uint64_t> reasons;   // LookupRoute reason_code of OK answers
  std::uint64_t sent = 0;                         // calls started
  std::uint64_t completed = 0;                    // calls that ended (any status)
  std::uint64_t not_sent = 0;    // intended but never started (backlog at the end or dropped)
  std::uint64_t unfinished = 0;  // started, no answer by the end of the drain
  std::int64_t last_done_ns = 0;
};

// Records one finished call (the H2Connection on_done hook of this worker's connections):
// latency = done − intended, status, and the reason_code of an OK LookupRoute answer.
void record_outcome(const WorkerPlan& plan, CallOutcome&& outcome, WorkerResult* result);

// Runs until plan.end_ns + drain (or Ctrl-C, or every connection dead) on the calling thread.
// The connections must be used by this thread only while it runs.
void run_worker(const WorkerPlan& plan, const Workload& workload,
                std::vector<std::unique_ptr<H2Connection>>& connections, WorkerResult* result);

}  // namespace ic::tools::bench
