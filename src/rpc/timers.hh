#pragma once
// The clock and timers a gRPC session needs for call deadlines: the one timer
// API of runtime/timers.hh (the connection core's Reactor in the server, a
// manual clock in tests). Only the interface: src/rpc does not depend on the
// io_uring runtime.

#include "runtime/timers.hh"

namespace ic::rpc {

using Timers = runtime::Timers;

}  // namespace ic::rpc
