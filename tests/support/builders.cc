#include "builders.hh"

#include <chrono>

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

pb::CacheStateUpdate r1_update(const std::string& tenant, const std::string& model,
                               const std::string& scheme, const std::vector<std::string>& hashes,
                               std::int64_t timestamp_us) {
  pb::CacheStateUpdate u = scoped_update(tenant, model, scheme, "r1", timestamp_us);
  for (const std::string& h : hashes) {
    auto* p = u.add_prefixes();
    p->set_prefix_hash(h);
    p->set_token_count(16);
  }
  return u;
}

pb::CacheEvent r1_event(pb::CacheEvent::Type type, const std::string& tenant,
                        const std::string& hash, std::int64_t timestamp_us) {
  pb::CacheEvent e;
  e.set_type(type);
  e.set_replica_id("r1");
  e.set_model_id("m");
  e.set_tenant_id(tenant);
  e.set_prefix_hash(hash);
  e.set_timestamp_us(timestamp_us);
  return e;
}

std::vector<pb::CacheStateUpdate> two_replica_workload(int first, int count,
                                                       std::int64_t timestamp_us) {
  std::vector<pb::CacheStateUpdate> out;
  for (int t = first; t < first + count; ++t) {
    const std::uint64_t base = 1000 * static_cast<std::uint64_t>(t);
    const std::string tenant = "tenant-" + std::to_string(t);
    out.push_back(chain_update(tenant, "m", "vllm", "r-a", timestamp_us,
                               {base, base + 1, base + 2, base + 3}, 0, "", 64));
    out.push_back(
        chain_update(tenant, "m", "vllm", "r-b", timestamp_us, {base, base + 1}, 0, "", 64));
  }
  return out;
}

std::vector<pb::LookupRouteRequest> two_replica_probes(int tenants) {
  std::vector<pb::LookupRouteRequest> out;
  for (int t = 0; t < tenants; ++t) {
    pb::LookupRouteRequest r = scoped_lookup("tenant-" + std::to_string(t), "m", "vllm");
    for (std::uint64_t b = 0; b < 5; ++b) {
      r.add_block_hashes(block_hash(1000 * static_cast<std::uint64_t>(t) + b));
      r.add_block_token_counts(64);
    }
    out.push_back(r);
  }
  return out;
}

std::int64_t hour_from_now_us() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count() +
         3'600'000'000LL;
}

}  // namespace ic::test
