#include "sharding/pd_wire.hh"

#include <span>

namespace ic::sharding::wire {

index::LookupQuery to_query(const pb::LookupPDRouteRequest& request,
                            std::vector<std::string_view>& hashes) {
  hashes.clear();
  for (const std::string& h : request.block_hashes()) hashes.emplace_back(h);
  index::LookupQuery q;
  q.tenant_id = request.tenant_id();
  q.model_id = request.model_id();
  q.hash_scheme = request.hash_scheme();
  q.adapter_id = request.adapter_id();
  q.prefix_hash = request.prefix_hash();
  q.prefix_token_count = request.prefix_token_count();
  q.block_hashes = hashes;
  q.block_token_counts =
      std::span<const std::int32_t>(request.block_token_counts().data(),
                                    static_cast<std::size_t>(request.block_token_counts().size()));
  q.token_ids = std::span<const std::uint32_t>(
      request.token_ids().data(), static_cast<std::size_t>(request.token_ids().size()));
  q.has_prompt_text = !request.prompt_text().empty();
  q.slo_ttft_ms = request.slo().ttft_ms();
  return q;
}

void to_response(const index::PdResult& result, pb::LookupPDRouteResponse* out) {
  out->Clear();
  out->mutable_prefill_replica_id()->assign(result.prefill_replica_id);
  out->mutable_decode_replica_id()->assign(result.decode_replica_id);
  out->mutable_transport_hint()->assign(result.transport_hint);
  out->mutable_reason_code()->assign(result.reason_code);
  out->set_prefill_matched_tokens(result.prefill_matched_tokens);
  out->set_decode_matched_tokens(result.decode_matched_tokens);
  out->set_prefill_score(result.prefill_score);
  out->set_decode_score(result.decode_score);
  out->set_uncached_tokens(result.uncached_tokens);
  out->set_lookup_latency_us(result.lookup_latency_us);
  out->mutable_adapter_id()->assign(result.adapter_id);
}

void lookup_pd_route(index::Shard& shard, const pb::LookupPDRouteRequest& request,
                     const index::LookupContext& ctx, pb::LookupPDRouteResponse* out) {
  thread_local std::vector<std::string_view> hashes;
  thread_local index::PdResult result;
  const index::LookupQuery q = to_query(request, hashes);
  shard.lookup_pd(q, request.pd_topology_ref(), ctx, &result);
  to_response(result, out);
}

}  // namespace ic::sharding::wire
