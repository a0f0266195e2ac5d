#pragma once
// The reactor backend the tests that run a Runtime or the server binary use:
// IC_REACTOR_BACKEND ("auto", "io_uring" or "epoll"; `meson test --setup
// epoll` sets "epoll"), "auto" when unset. The runtime and net tests pass it
// in Runtime::Options; tests/integration/support/server_process passes it to
// the server as --reactor-backend.

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "runtime/runtime.hh"

namespace ic::testing {

// IC_REACTOR_BACKEND's text, "auto" when unset or empty.
inline std::string reactor_backend_name() {
  const char* v = std::getenv("IC_REACTOR_BACKEND");
  return v == nullptr || *v == '\0' ? std::string("auto") : std::string(v);
}

// IC_REACTOR_BACKEND as the runtime's choice; throws std::invalid_argument
// for a value that is none of the three (a misspelt setup must not quietly
// test io_uring twice).
inline ic::runtime::BackendChoice reactor_backend() {
  const std::string name = reactor_backend_name();
  const auto choice = ic::runtime::parse_backend_choice(name);
  if (!choice)
    throw std::invalid_argument("IC_REACTOR_BACKEND: want auto, io_uring or epoll, got " + name);
  return *choice;
}

}  // namespace ic::testing
