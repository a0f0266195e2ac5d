#pragma once
// The clock and timers a gRPC session needs for call deadlines: the one timer
// API of runtime/timers.hh (the connection core's Reactor in the server, a
// manual clock in tests). Only the interface: src/grpc does not depend on the
// io_uring runtime.

#include "runtime/timers.hh"

namespace ic::grpc {

using Timers = runtime::Timers;

}  // namespace ic::grpc
