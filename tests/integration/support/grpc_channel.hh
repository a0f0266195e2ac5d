#pragma once
// grpc++ (Debian libgrpc++-dev) as a real third-party client of the server:
// an insecure (h2c) channel to 127.0.0.1, a deadline helper, one unary call,
// the ReportCacheState client stream several tests send and a Health/Watch.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "support/server_process.hh"

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

// The unary `rpc` of `stub` (e.g. &InferenceCache::Stub::GetCacheState) with a
// 10 s deadline; returns the call's status and fills *response.
template <class Stub, class Request, class Response>
grpc::Status call_unary(Stub& stub,
                        grpc::Status (Stub::*rpc)(grpc::ClientContext*, const Request&, Response*),
                        const Request& request, Response* response) {
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline_in(std::chrono::seconds(10)));
  return (stub.*rpc)(&ctx, request, response);
}

// Streams `updates` through ReportCacheState with a 10 s deadline and
// half-closes; returns the call's status and fills *ack. A refused write
// stops the stream (the status then says why).
grpc::Status report_cache_state(
    inferencecache::v1alpha1::InferenceCache::Stub& stub,
    const std::vector<inferencecache::v1alpha1::CacheStateUpdate>& updates,
    inferencecache::v1alpha1::Ack* ack);

// LookupRoute of `request` with a 10 s deadline, as comparable text: the
// response's ShortDebugString without lookup_latency_us (the only field time
// may change), or "error: <message>" when the call fails.
std::string lookup_text(inferencecache::v1alpha1::InferenceCache::Stub& stub,
                        const inferencecache::v1alpha1::LookupRouteRequest& request);

// LookupPDRoute of `request` with a 10 s deadline, as lookup_text does.
std::string pd_lookup_text(inferencecache::v1alpha1::InferenceCache::Stub& stub,
                           const inferencecache::v1alpha1::LookupPDRouteRequest& request);

// A LookupPDRoute request of (tenant, model m, hash scheme vllm) for topology
// `ref`: a chain of `blocks` 512-token blocks first, first + 1, ...
inferencecache::v1alpha1::LookupPDRouteRequest pd_request(const std::string& tenant,
                                                          const std::string& ref,
                                                          std::uint64_t first, int blocks);

// Health/Watch of the server as a whole (service ""), with a 30 s deadline:
// the server sends the current status at once, then each change
// (grpc/grpc doc/health-checking.md).
struct HealthWatch {
  using Status = grpc::health::v1::HealthCheckResponse::ServingStatus;
  explicit HealthWatch(grpc::health::v1::Health::Stub& stub) {
    ctx.set_deadline(deadline_in(std::chrono::seconds(30)));
    reader = stub.Watch(&ctx, grpc::health::v1::HealthCheckRequest());
  }
  // The next status sent; nullopt once the stream has ended.
  std::optional<Status> next() {
    grpc::health::v1::HealthCheckResponse response;
    if (!reader->Read(&response)) return std::nullopt;
    return response.status();
  }

  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<grpc::health::v1::HealthCheckResponse>> reader;
};

// A real server and a connected grpc++ InferenceCache stub to it.
struct GrpcServed {
  explicit GrpcServed(ServerOptions options = {}) : server(std::move(options)) {}
  // SIGTERM with the channel closed; the server's exit status (the contract's: 0).
  int stop() {
    stub.reset();
    channel.reset();
    return server.stop();
  }

  ServerProcess server;
  std::shared_ptr<grpc::Channel> channel = insecure_channel(server.grpc_port());
  std::unique_ptr<inferencecache::v1alpha1::InferenceCache::Stub> stub =
      inferencecache::v1alpha1::InferenceCache::NewStub(channel);
};

}  // namespace ic::itest
