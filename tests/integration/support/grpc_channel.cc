#include "support/grpc_channel.hh"
#include "support/text.hh"

#include <stdexcept>
#include <string>

namespace ic::itest {

std::shared_ptr<grpc::Channel> insecure_channel(uint16_t grpc_port,
                                                const grpc::ChannelArguments& args,
                                                std::chrono::milliseconds connect_timeout) {
  std::string target = loopback(grpc_port);
  auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  if (!channel->WaitForConnected(deadline_in(connect_timeout))) {
    throw std::runtime_error("grpc++ channel to " + target + " did not connect");
  }
  return channel;
}

}  // namespace ic::itest
