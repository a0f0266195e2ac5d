#include "builders.hh"

#include "text.hh"

namespace ic::test {

namespace pb = inferencecache::v1alpha1;

pb::LookupRouteRequest numbered_lookup(int i) {
  pb::LookupRouteRequest req;
  req.set_model_id("llama-3-8b");
  req.set_tenant_id(itest::numbered("team-", i % 16));
  req.set_hash_scheme("vllm-sha256");
  req.set_prefix_hash(std::to_string(i));
  req.set_adapter_id(itest::numbered("a", i));
  return req;
}

pb::LookupRouteRequest gateway_request() {
  pb::LookupRouteRequest req;
  req.set_model_id("llama-3-8b");
  req.set_tenant_id("team-a");
  req.set_hash_scheme("vllm-sha256");
  req.set_prefix_hash(std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  req.set_adapter_id("lora-7");
  return req;
}

pb::CacheStateUpdate probe_update() {
  pb::CacheStateUpdate u;
  u.set_replica_id("replica-1");
  u.set_model_id("llama-3-8b");
  u.set_tenant_id(kProbeTenant);
  u.set_hash_scheme("vllm-sha256");
  return u;
}

pb::CacheStateUpdate numbered_probe_update(int i) {
  pb::CacheStateUpdate u = probe_update();
  u.set_replica_id(itest::numbered("replica-", i % 4));
  auto* p = u.add_prefixes();
  p->set_prefix_hash(std::string(8, static_cast<char>(i)));
  p->set_token_count(16);
  return u;
}

std::string block_hash(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (56 - 8 * i));
  return s;
}

pb::CacheStateUpdate scoped_update(const std::string& tenant, const std::string& model,
                                   const std::string& scheme, const std::string& replica,
                                   std::int64_t timestamp_us) {
  pb::CacheStateUpdate u;
  u.set_tenant_id(tenant);
  u.set_model_id(model);
  u.set_hash_scheme(scheme);
  u.set_replica_id(replica);
  u.set_timestamp_us(timestamp_us);
  return u;
}

pb::LookupRouteRequest scoped_lookup(const std::string& tenant, const std::string& model,
                                     const std::string& scheme) {
  pb::LookupRouteRequest r;
  r.set_tenant_id(tenant);
  r.set_model_id(model);
  r.set_hash_scheme(scheme);
  return r;
}

pb::CacheStateUpdate chain_update(const std::string& tenant, const std::string& model,
                                  const std::string& scheme, const std::string& replica,
                                  std::int64_t timestamp_us,
                                  const std::vector<std::uint64_t>& blocks, int tier,
                                  const std::string& adapter, std::int32_t per_block) {
  pb::CacheStateUpdate u = scoped_update(tenant, model, scheme, replica, timestamp_us);
  auto* p = u.add_prefixes();
  for (std::uint64_t b : blocks) {
    p->add_block_hashes(block_hash(b));
    p->add_block_token_counts(per_block);
  }
  p->set_tier(static_cast<pb::CacheTier>(tier));
  p->set_adapter_id(adapter);
  return u;
}

}  // namespace ic::test
