// grpc++ client channel setup for the shell tools (cli, replay): grpc++ is a client here only,
// never in the server (docs/architecture.md).
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/support/status.h>

#include <memory>
#include <string>

namespace ic::tools {

// Opens an insecure (h2c) channel to `address` ("host:port") and waits up to `timeout_ms` for it
// to connect. Returns nullptr and sets *error when it does not: an unknown host or a refused
// port at once (probe_tcp's reason, with the address), else "cannot reach the InferenceCache
// server at 127.0.0.1:9090 within 3000 ms: is it running?". `tag` makes channels with
// different tags use separate TCP connections (e.g. lookups apart from ingest).
std::shared_ptr<grpc::Channel> connect_channel(const std::string& address, int timeout_ms,
                                               const std::string& tag, std::string* error);

// "UNAVAILABLE", "DEADLINE_EXCEEDED", … for a grpc::StatusCode ("STATUS_<n>" if unknown).
std::string status_name(grpc::StatusCode code);

}  // namespace ic::tools
