#pragma once
// grpc.health.v1.Health (grpc/doc/health-checking.md; docs/contract.md "Identity"):
// services "" and "inferencecache.v1alpha1.InferenceCache" are SERVING while
// the server is ready, NOT_SERVING otherwise.
//   Check: unknown service → NOT_FOUND.
//   Watch: sends the current status (SERVICE_UNKNOWN for an unknown service)
//          and keeps the stream open; at shutdown it sends NOT_SERVING and
//          ends with OK.

#include <functional>

#include "grpc/call.hh"

namespace ic::service {

// Readiness probe read on every Check/Watch; nullptr = always ready.
using ReadyFn = std::function<bool()>;

// Registers /grpc.health.v1.Health/Check and /Watch in `methods`.
void add_health(grpc::MethodTable& methods, ReadyFn ready);

}  // namespace ic::service
