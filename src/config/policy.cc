#include "config/policy.hh"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

namespace ic::config {
namespace {

using json = nlohmann::json;

// A policy body error carrying the 400 reason.
struct PolicyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr std::int64_t kMinVersion = 3;
constexpr std::int64_t kMaxVersion = 7;

void require_object(const json& j, const std::string& where) {
  if (!j.is_object()) throw PolicyError(where + ": expected an object");
}

// Rejects any member of `j` not in `allowed` (docs/policy.md: unknown field → 400).
void check_fields(const json& j, std::initializer_list<std::string_view> allowed,
                  const std::string& where) {
  for (const auto& [name, _] : j.items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || a == name;
    if (!known) throw PolicyError("unknown field \"" + name + "\" in " + where);
  }
}

std::int64_t get_int(const json& v, std::int64_t lo, std::int64_t hi, const std::string& where) {
  if (!v.is_number_integer()) throw PolicyError(where + ": expected an integer");
  std::int64_t out = 0;
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi)) throw PolicyError(where + ": out of range");
    out = static_cast<std::int64_t>(u);
  } else {
    out = v.get<std::int64_t>();
  }
  if (out < lo || out > hi) throw PolicyError(where + ": out of range");
  return out;
}

std::int32_t get_int32(const json& v, const std::string& where) {
  return static_cast<std::int32_t>(get_int(v, std::numeric_limits<std::int32_t>::min(),
                                           std::numeric_limits<std::int32_t>::max(), where));
}

bool get_bool(const json& v, const std::string& where) {
  if (!v.is_boolean()) throw PolicyError(where + ": expected a boolean");
  return v.get<bool>();
}

std::string get_string(const json& v, const std::string& where) {
  if (!v.is_string()) throw PolicyError(where + ": expected a string");
  return v.get<std::string>();
}

void parse_strategy(const json& j, CachePolicy& p, const std::string& where) {
  require_object(j, where);
  check_fields(j, {"enableChainMatching", "requireChain", "enableTenantHot"}, where);
  if (auto it = j.find("enableChainMatching"); it != j.end())
    p.enable_chain_matching = get_bool(*it, where + ".enableChainMatching");
  if (auto it = j.find("requireChain"); it != j.end())
    p.require_chain = get_bool(*it, where + ".requireChain");
  if (auto it = j.find("enableTenantHot"); it != j.end())
    p.enable_tenant_hot = get_bool(*it, where + ".enableTenantHot");
}

// A non-negative number (policy `loadAware.*`).
double get_non_negative(const json& v, const std::string& where) {
  if (!v.is_number()) throw PolicyError(where + ": expected a number");
  const double d = v.get<double>();
  if (!(d >= 0) || !std::isfinite(d)) throw PolicyError(where + ": expected a number >= 0");
  return d;
}

void parse_ranking(const json& v, CachePolicy& p, const std::string& where) {
  const std::string r = get_string(v, where);
  if (r == "reference") {
    p.ranking = Ranking::kReference;
  } else if (r == "load-aware") {
    p.ranking = Ranking::kLoadAware;
  } else if (r == "work-aware") {
    p.ranking = Ranking::kWorkAware;
  } else if (!r.empty()) {
    throw PolicyError(where + ": expected \"reference\", \"load-aware\" or \"work-aware\"");
  }
}

void parse_load_aware(const json& j, LoadAwareKnobs& k, const std::string& where) {
  require_object(j, where);
  check_fields(j, {"loadCostTokens", "loadWindow", "pressureLoad", "saturationPressure"}, where);
  if (auto it = j.find("loadCostTokens"); it != j.end())
    k.load_cost_tokens = get_non_negative(*it, where + ".loadCostTokens");
  if (auto it = j.find("loadWindow"); it != j.end()) {
    k.load_window = get_non_negative(*it, where + ".loadWindow");
    if (k.load_window < 1) throw PolicyError(where + ".loadWindow: expected a number >= 1");
  }
  if (auto it = j.find("pressureLoad"); it != j.end())
    k.pressure_load = get_non_negative(*it, where + ".pressureLoad");
  if (auto it = j.find("saturationPressure"); it != j.end())
    k.saturation_pressure = get_non_negative(*it, where + ".saturationPressure");
}

// Parses one policies[] entry. Missing fields keep the defaults, which are
// also what the version normalizations of docs/policy.md ask for (v<5 missing
// routingFloorScore = 0.1, v<6 strategy true/false/true, v<7 affinity true).
std::pair<std::string, CachePolicy> parse_policy(const json& j, std::int64_t version,
                                                 const std::string& where) {
  require_object(j, where);
  check_fields(j,
               {"namespace", "evictionTTL", "minimumPrefixTokens", "minimumMatchedTokens",
                "routingFloorScore", "lookupTimeoutMs", "affinityRouting", "eviction", "strategy",
                "ranking", "loadAware"},
               where);
  CachePolicy p;
  std::string ns;
  if (auto it = j.find("namespace"); it != j.end()) ns = get_string(*it, where + ".namespace");
  if (auto it = j.find("evictionTTL"); it != j.end()) {
    const std::int64_t ns_ttl =
        get_int(*it, std::numeric_limits<std::int64_t>::min(),
                std::numeric_limits<std::int64_t>::max(), where + ".evictionTTL");
    p.eviction_ttl_us = ns_ttl > 0 ? std::max<std::int64_t>(1, ns_ttl / 1000) : 0;
  }
  if (auto it = j.find("minimumPrefixTokens"); it != j.end())
    p.minimum_prefix_tokens = std::max(0, get_int32(*it, where + ".minimumPrefixTokens"));
  if (auto it = j.find("minimumMatchedTokens"); it != j.end()) {
    p.minimum_matched_tokens = std::max(0, get_int32(*it, where + ".minimumMatchedTokens"));
    // v<4: 0 meant "unset", i.e. the default 64.
    if (version < 4 && p.minimum_matched_tokens == 0) p.minimum_matched_tokens = 64;
  }
  if (auto it = j.find("routingFloorScore"); it != j.end()) {
    if (!it->is_number()) throw PolicyError(where + ".routingFloorScore: expected a number");
    p.routing_floor_score = std::max(0.0, it->get<double>());
  }
  if (auto it = j.find("lookupTimeoutMs"); it != j.end())
    p.lookup_timeout_ms = std::max(0, get_int32(*it, where + ".lookupTimeoutMs"));
  if (auto it = j.find("affinityRouting"); it != j.end())
    p.affinity_routing = get_bool(*it, where + ".affinityRouting");
  if (auto it = j.find("eviction"); it != j.end()) {
    const std::string e = get_string(*it, where + ".eviction");
    if (e == "lru" || e.empty()) {
      p.eviction = EvictionAlgorithm::kLru;
    } else if (e == "lfu") {
      p.eviction = EvictionAlgorithm::kLfu;
    } else {
      throw PolicyError(where + ".eviction: expected \"lru\" or \"lfu\"");
    }
  }
  if (auto it = j.find("strategy"); it != j.end()) parse_strategy(*it, p, where + ".strategy");
  if (auto it = j.find("ranking"); it != j.end()) parse_ranking(*it, p, where + ".ranking");
  if (auto it = j.find("loadAware"); it != j.end())
    parse_load_aware(*it, p.load_aware, where + ".loadAware");
  if (p.require_chain && !p.enable_chain_matching)
    throw PolicyError(where + ": requireChain needs enableChainMatching");
  return {std::move(ns), p};
}

std::pair<std::string, TenantQuota> parse_tenant(const json& j, const std::string& where) {
  require_object(j, where);
  check_fields(j, {"tenantID", "maxIndexEntries", "isolationMode"}, where);
  std::string id;
  TenantQuota q;
  if (auto it = j.find("tenantID"); it != j.end()) id = get_string(*it, where + ".tenantID");
  if (auto it = j.find("maxIndexEntries"); it != j.end()) {
    q.max_index_entries = std::max<std::int64_t>(
        0, get_int(*it, std::numeric_limits<std::int64_t>::min(),
                   std::numeric_limits<std::int64_t>::max(), where + ".maxIndexEntries"));
  }
  if (auto it = j.find("isolationMode"); it != j.end())
    q.isolation_mode = get_string(*it, where + ".isolationMode");
  return {std::move(id), std::move(q)};
}

const json* find_array(const json& doc, const char* name) {
  auto it = doc.find(name);
  if (it == doc.end() || it->is_null()) return nullptr;
  if (!it->is_array()) throw PolicyError(std::string(name) + ": expected an array");
  return &*it;
}

std::shared_ptr<const PolicySet> parse_document(const json& doc, std::string_view body) {
  require_object(doc, "document");
  check_fields(doc, {"version", "policies", "tenants", "pdTopologies"}, "document");
  auto vit = doc.find("version");
  if (vit == doc.end()) throw PolicyError("missing version");
  if (!vit->is_number_integer()) throw PolicyError("version: expected an integer");
  const std::int64_t version =
      vit->is_number_unsigned()
          ? static_cast<std::int64_t>(std::min<std::uint64_t>(vit->get<std::uint64_t>(), 1u << 30))
          : vit->get<std::int64_t>();
  if (version < kMinVersion || version > kMaxVersion)
    throw PolicyError("unsupported version " + std::to_string(version) + " (accepted 3..7)");

  std::unordered_map<std::string, CachePolicy, StringHash, std::equal_to<>> policies;
  std::unordered_map<std::string, TenantQuota, StringHash, std::equal_to<>> quotas;
  if (const json* arr = find_array(doc, "policies")) {
    for (std::size_t i = 0; i < arr->size(); ++i) {
      auto [ns, p] = parse_policy((*arr)[i], version, "policies[" + std::to_string(i) + "]");
      if (!ns.empty()) policies.insert_or_assign(std::move(ns), p);
    }
  }
  if (const json* arr = find_array(doc, "tenants")) {
    for (std::size_t i = 0; i < arr->size(); ++i) {
      auto [id, q] = parse_tenant((*arr)[i], "tenants[" + std::to_string(i) + "]");
      if (!id.empty() && id != kReservedTenant)
        quotas.insert_or_assign(std::move(id), std::move(q));
    }
  }
  PdTopologyMap topologies;
  if (auto it = doc.find("pdTopologies"); it != doc.end() && !it->is_null()) {
    try {
      topologies = parse_pd_topologies(*it);
    } catch (const std::runtime_error& e) {
      throw PolicyError(e.what());
    }
  }
  return std::make_shared<const PolicySet>(std::move(policies), std::move(quotas),
                                           std::string(body), std::move(topologies));
}

}  // namespace

PolicySet::PolicySet(
    std::unordered_map<std::string, CachePolicy, StringHash, std::equal_to<>> policies,
    std::unordered_map<std::string, TenantQuota, StringHash, std::equal_to<>> quotas,
    std::string source_json, PdTopologyMap pd_topologies)
    : policies_(std::move(policies)),
      quotas_(std::move(quotas)),
      source_json_(std::move(source_json)),
      pd_topologies_(std::move(pd_topologies)) {}

const PdTopology* PolicySet::pd_topology(std::string_view name) const noexcept {
  if (pd_topologies_.empty()) return nullptr;
  auto it = pd_topologies_.find(name);
  return it == pd_topologies_.end() ? nullptr : it->second.get();
}

const CachePolicy& PolicySet::policy_for(std::string_view tenant) const noexcept {
  if (policies_.empty()) return default_policy_;
  auto it = policies_.find(tenant);
  return it == policies_.end() ? default_policy_ : it->second;
}

const TenantQuota* PolicySet::quota_for(std::string_view tenant) const noexcept {
  if (quotas_.empty()) return nullptr;
  auto it = quotas_.find(tenant);
  return it == quotas_.end() ? nullptr : &it->second;
}

std::shared_ptr<const PolicySet> PolicySet::defaults() {
  static const std::shared_ptr<const PolicySet> kDefaults = std::make_shared<const PolicySet>();
  return kDefaults;
}

PolicyParseResult parse_policy_json(std::string_view body) {
  PolicyParseResult result;
  json doc;
  try {
    doc = json::parse(body.begin(), body.end());
  } catch (const json::parse_error& e) {
    // nlohmann reports trailing content after the document as a parse error at
    // the first extra byte ("syntax error ... expected end of input").
    const std::string what = e.what();
    result.error = what.find("; expected end of input") != std::string::npos
                       ? "trailing data after the JSON document"
                       : "invalid JSON: " + what;
    return result;
  } catch (const json::exception& e) {
    // e.g. out_of_range 406: a number literal beyond double (1e400).
    result.error = std::string("invalid JSON: ") + e.what();
    return result;
  }
  try {
    result.set = parse_document(doc, body);
  } catch (const PolicyError& e) {
    result.error = e.what();
  } catch (const json::exception& e) {
    result.error = std::string("invalid policy: ") + e.what();
  }
  return result;
}

}  // namespace ic::config
