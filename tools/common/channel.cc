#include "common/channel.hh"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <chrono>

#include "common/probe.hh"
#include "rpc/status.hh"

namespace ic::tools {

std::shared_ptr<::grpc::Channel> connect_channel(const std::string& address, int timeout_ms,
                                                 const std::string& tag, std::string* error) {
  // A refused port or an unknown host is reported at once, with the address, instead of
  // after the whole timeout.
  if (std::string why = probe_tcp(address, timeout_ms); !why.empty()) {
    *error = "cannot reach the InferenceCache server: " + why;
    return nullptr;
  }
  ::grpc::ChannelArguments args;
  // A distinct channel arg set plus a local subchannel pool gives each tag its own connection.
  args.SetString("ic.tools.connection", tag);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(64 << 20);
  auto channel = ::grpc::CreateCustomChannel(address, ::grpc::InsecureChannelCredentials(), args);
  const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms);
  if (!channel->WaitForConnected(deadline)) {
    *error = "cannot reach the InferenceCache server at " + address + " within " +
             std::to_string(timeout_ms) + " ms: is it running?";
    return nullptr;
  }
  return channel;
}

std::string status_name(::grpc::StatusCode code) {
  const int value = static_cast<int>(code);
  if (value < 0 || value > static_cast<int>(ic::rpc::StatusCode::kUnauthenticated)) {
    return "STATUS_" + std::to_string(value);
  }
  return std::string(ic::rpc::status_name(static_cast<ic::rpc::StatusCode>(value)));
}

}  // namespace ic::tools
