#include "common/requests.hh"

#include "rpc/status.hh"

namespace ic::tools {

namespace v1 = inferencecache::v1alpha1;

v1::LookupRouteRequest make_lookup(const TraceRequest& request, const Scope& scope) {
  v1::LookupRouteRequest lookup;
  lookup.set_tenant_id(scope.tenant_id);
  lookup.set_model_id(scope.model_id);
  lookup.set_hash_scheme(scope.hash_scheme);
  for (auto id : request.hash_ids) lookup.add_block_hashes(block_hash_bytes(id));
  for (auto count : block_token_counts(request)) lookup.add_block_token_counts(count);
  return lookup;
}

v1::PrefixEntry make_chain_entry(const TraceRequest& request) {
  v1::PrefixEntry entry;
  for (auto id : request.hash_ids) entry.add_block_hashes(block_hash_bytes(id));
  for (auto count : block_token_counts(request)) entry.add_block_token_counts(count);
  entry.set_token_count(request.input_length);
  entry.set_tier(v1::CACHE_TIER_T1);
  return entry;
}

bool hex_decode(const std::string& hex, std::string* bytes) {
  if (hex.size() % 2 != 0) return false;
  bytes->clear();
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = rpc::hex_digit_value(hex[i]);
    const int lo = rpc::hex_digit_value(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    bytes->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

std::string hex_encode(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    hex.push_back(kDigits[c >> 4]);
    hex.push_back(kDigits[c & 0xf]);
  }
  return hex;
}

}  // namespace ic::tools
