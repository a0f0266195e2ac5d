#pragma once
// grpc.health.v1.Health (grpc/doc/health-checking.md; docs/streams.md
// "Health Watch"): services "", "inferencecache.v1alpha1.InferenceCache",
// and the Endpoint Picker Protocol's "readiness" and
// "envoy.service.ext_proc.v3.ExternalProcessor" (docs/gateway.md "Health")
// are SERVING while the server is ready (admin::Readiness: every core serves
// and draining has not begun), NOT_SERVING otherwise; "liveness" is SERVING
// while the process answers.
//   Check: unknown service → NOT_FOUND.
//   Watch: sends the current status first (SERVICE_UNKNOWN for an unknown
//          service, which never changes), then a message only when the status
//          changes, as grpc-go's health server does. Readiness is re-read every
//          kWatchPollUs on each core that has an open Watch (no timer runs
//          without one). At shutdown it sends NOT_SERVING (unless that was the
//          last status sent) and ends with OK so the drain can finish.

#include <cstdint>
#include <functional>

#include "rpc/call.hh"
#include "rpc/timers.hh"

namespace ic::service {

// Readiness probe read on every Check and Watch poll; nullptr = always ready.
// Called on reactor threads: must be cheap and thread-safe.
using ReadyFn = std::function<bool()>;

// How often open Watch streams re-read readiness (µs): the longest a status
// change waits before it is sent.
inline constexpr std::int64_t kWatchPollUs = 100'000;

// Registers /grpc.health.v1.Health/Check and /Watch in `methods`; Watch polls
// on `timers` (this core's; outlives `methods`).
void add_health(rpc::MethodTable& methods, ReadyFn ready, rpc::Timers& timers);

}  // namespace ic::service
