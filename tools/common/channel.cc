#include "common/channel.hh"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <chrono>

namespace ic::tools {

std::shared_ptr<grpc::Channel> connect_channel(const std::string& address, int timeout_ms,
                                               const std::string& tag, std::string* error) {
  grpc::ChannelArguments args;
  // A distinct channel arg set plus a local subchannel pool gives each tag its own connection.
  args.SetString("ic.tools.connection", tag);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(64 << 20);
  auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms);
  if (!channel->WaitForConnected(deadline)) {
    *error = "cannot reach the InferenceCache server at " + address + " within " +
             std::to_string(timeout_ms) + " ms: is it running?";
    return nullptr;
  }
  return channel;
}

std::string status_name(grpc::StatusCode code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const auto index = static_cast<std::size_t>(code);
  return index < std::size(kNames) ? kNames[index] : "STATUS_" + std::to_string(index);
}

}  // namespace ic::tools
