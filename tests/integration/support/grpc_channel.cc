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

grpc::Status report_cache_state(
    inferencecache::v1alpha1::InferenceCache::Stub& stub,
    const std::vector<inferencecache::v1alpha1::CacheStateUpdate>& updates,
    inferencecache::v1alpha1::Ack* ack) {
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline_in(std::chrono::seconds(10)));
  auto writer = stub.ReportCacheState(&ctx, ack);
  for (const auto& u : updates) {
    if (!writer->Write(u)) break;
  }
  writer->WritesDone();
  return writer->Finish();
}

std::string lookup_text(inferencecache::v1alpha1::InferenceCache::Stub& stub,
                        const inferencecache::v1alpha1::LookupRouteRequest& request) {
  inferencecache::v1alpha1::LookupRouteResponse out;
  const grpc::Status st =
      call_unary(stub, &inferencecache::v1alpha1::InferenceCache::Stub::LookupRoute, request, &out);
  if (!st.ok()) return "error: " + st.error_message();
  out.set_lookup_latency_us(0);
  return out.ShortDebugString();
}

}  // namespace ic::itest
