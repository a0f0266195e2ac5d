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

std::string pd_lookup_text(inferencecache::v1alpha1::InferenceCache::Stub& stub,
                           const inferencecache::v1alpha1::LookupPDRouteRequest& request) {
  inferencecache::v1alpha1::LookupPDRouteResponse out;
  const grpc::Status st = call_unary(
      stub, &inferencecache::v1alpha1::InferenceCache::Stub::LookupPDRoute, request, &out);
  if (!st.ok()) return "error: " + st.error_message();
  out.set_lookup_latency_us(0);
  return out.ShortDebugString();
}

inferencecache::v1alpha1::LookupPDRouteRequest pd_request(const std::string& tenant,
                                                          const std::string& ref,
                                                          std::uint64_t first, int blocks) {
  inferencecache::v1alpha1::LookupPDRouteRequest r;
  r.set_tenant_id(tenant);
  r.set_model_id("m");
  r.set_hash_scheme("vllm");
  r.set_pd_topology_ref(ref);
  for (int i = 0; i < blocks; ++i) {
    std::string h(8, '\0');
    const std::uint64_t v = first + static_cast<std::uint64_t>(i);
    for (int b = 0; b < 8; ++b) h[b] = static_cast<char>(v >> (56 - 8 * b));
    r.add_block_hashes(h);
    r.add_block_token_counts(512);
  }
  return r;
}

}  // namespace ic::itest
