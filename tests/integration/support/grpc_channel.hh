#pragma once
// grpc++ (Debian libgrpc++-dev) as a real third-party client of the server:
// an insecure (h2c) channel to 127.0.0.1 and a deadline helper.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <memory>

namespace ic::itest {

// A channel to 127.0.0.1:`grpc_port` with insecure credentials, connected
// before it is returned (throws std::runtime_error after `connect_timeout`).
// `args` may raise message limits (grpc++ defaults: send unlimited, receive 4 MiB).
std::shared_ptr<grpc::Channel> insecure_channel(
    uint16_t grpc_port, const grpc::ChannelArguments& args = {},
    std::chrono::milliseconds connect_timeout = std::chrono::seconds(10));

// now + `timeout`, for ClientContext::set_deadline.
inline std::chrono::system_clock::time_point deadline_in(std::chrono::milliseconds timeout) {
  return std::chrono::system_clock::now() + timeout;
}

}  // namespace ic::itest
