// `pdTopologies` of the policy document (docs/pd-routing.md "Topology"):
// parsed and validated with nlohmann-json; every rejection names the field.

#include "config/pd_topology.hh"

#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <unordered_set>

namespace ic::config {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& where, std::string_view why) {
  throw std::runtime_error(where + ": " + std::string(why));
}

void require_object(const json& j, const std::string& where) {
  if (!j.is_object()) fail(where, "expected an object");
}

void check_fields(const json& j, std::initializer_list<std::string_view> allowed,
                  const std::string& where) {
  for (const auto& [name, _] : j.items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || a == name;
    if (!known) throw std::runtime_error("unknown field \"" + name + "\" in " + where);
  }
}

std::string get_string(const json& v, const std::string& where) {
  if (!v.is_string()) fail(where, "expected a string");
  return v.get<std::string>();
}

std::int64_t get_int(const json& v, std::int64_t lo, std::int64_t hi, const std::string& where) {
  if (!v.is_number_integer()) fail(where, "expected an integer");
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
    fail(where, "expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
  const auto n = v.get<std::int64_t>();
  if (n < lo || n > hi)
    fail(where, "expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
  return n;
}

PdTransport parse_transport(const json& v, const std::string& where) {
  const std::string t = get_string(v, where);
  if (t == "Mooncake") return PdTransport::kMooncake;
  if (t == "NIXL") return PdTransport::kNixl;
  if (t == "Direct") return PdTransport::kDirect;
  fail(where, "expected \"Mooncake\", \"NIXL\" or \"Direct\"");
}

PdLevel parse_level(const json& v, const std::string& where) {
  const std::string l = get_string(v, where);
  if (l == "host") return PdLevel::kHost;
  if (l == "rack") return PdLevel::kRack;
  if (l == "zone") return PdLevel::kZone;
  if (l.empty()) return PdLevel::kNone;
  fail(where, "expected \"host\", \"rack\", \"zone\" or \"\"");
}

const std::string& domain_at(const PdReplica& r, PdLevel level) {
  return level == PdLevel::kHost ? r.host : level == PdLevel::kRack ? r.rack : r.zone;
}

std::vector<PdReplica> parse_pool(const json& v, bool decode, const std::string& where) {
  if (!v.is_array()) fail(where, "expected an array");
  if (v.size() > kMaxPdPoolReplicas)
    fail(where, "more than " + std::to_string(kMaxPdPoolReplicas) + " replicas");
  std::vector<PdReplica> pool;
  std::unordered_set<std::string> seen;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const json& j = v[i];
    require_object(j, at);
    if (decode) {
      check_fields(j, {"replica", "host", "rack", "zone", "slots"}, at);
    } else {
      check_fields(j, {"replica", "host", "rack", "zone"}, at);
    }
    PdReplica r;
    auto it = j.find("replica");
    if (it == j.end()) fail(at, "missing replica");
    r.replica_id = get_string(*it, at + ".replica");
    if (r.replica_id.empty()) fail(at + ".replica", "expected a non-empty replica id");
    if (!seen.insert(r.replica_id).second)
      fail(at + ".replica", "\"" + r.replica_id + "\" is listed twice");
    if (auto h = j.find("host"); h != j.end()) r.host = get_string(*h, at + ".host");
    if (auto k = j.find("rack"); k != j.end()) r.rack = get_string(*k, at + ".rack");
    if (auto z = j.find("zone"); z != j.end()) r.zone = get_string(*z, at + ".zone");
    if (auto s = j.find("slots"); s != j.end())
      r.slots = static_cast<std::int32_t>(get_int(*s, 1, 65536, at + ".slots"));
    pool.push_back(std::move(r));
  }
  return pool;
}

void parse_disaggregation(const json& j, PdTopology& t, const std::string& where) {
  require_object(j, where);
  check_fields(j, {"minUncachedTokens"}, where);
  if (auto it = j.find("minUncachedTokens"); it != j.end())
    t.min_uncached_tokens = get_int(*it, 0, 1LL << 31, where + ".minUncachedTokens");
}

PdTopology parse_topology(const json& j, const std::string& where) {
  require_object(j, where);
  check_fields(j,
               {"name", "transport", "prefill", "decode", "requiredDomain", "disaggregation",
                "decodeHoldMs", "affinityWeight"},
               where);
  PdTopology t;
  auto name = j.find("name");
  if (name == j.end()) fail(where, "missing name");
  t.name = get_string(*name, where + ".name");
  if (t.name.empty()) fail(where + ".name", "expected a non-empty name");
  auto transport = j.find("transport");
  if (transport == j.end()) fail(where, "missing transport");
  t.transport = parse_transport(*transport, where + ".transport");
  if (auto it = j.find("prefill"); it != j.end())
    t.prefill = parse_pool(*it, false, where + ".prefill");
  auto decode = j.find("decode");
  if (decode == j.end()) fail(where, "missing decode");
  t.decode = parse_pool(*decode, true, where + ".decode");
  if (t.decode.empty()) fail(where + ".decode", "expected at least one replica");
  if (auto it = j.find("requiredDomain"); it != j.end())
    t.required_level = parse_level(*it, where + ".requiredDomain");
  if (auto it = j.find("disaggregation"); it != j.end())
    parse_disaggregation(*it, t, where + ".disaggregation");
  if (auto it = j.find("decodeHoldMs"); it != j.end())
    t.decode_hold_us = get_int(*it, 1, 3'600'000, where + ".decodeHoldMs") * 1000;
  if (auto it = j.find("affinityWeight"); it != j.end()) {
    if (!it->is_number()) fail(where + ".affinityWeight", "expected a number");
    t.affinity_weight = it->get<double>();
    if (!(t.affinity_weight >= 0) || !std::isfinite(t.affinity_weight))
      fail(where + ".affinityWeight", "expected a number >= 0");
  }
  // A required level needs every replica placed at that level: a replica
  // without it could never be paired.
  if (t.required_level != PdLevel::kNone) {
    const char* level = t.required_level == PdLevel::kHost   ? "host"
                        : t.required_level == PdLevel::kRack ? "rack"
                                                             : "zone";
    for (const auto* pool : {&t.prefill, &t.decode}) {
      for (const PdReplica& r : *pool) {
        if (domain_at(r, t.required_level).empty())
          fail(where + ".requiredDomain", "replica \"" + r.replica_id + "\" has no " + level);
      }
    }
  }
  return t;
}

}  // namespace

std::string_view transport_name(PdTransport t) {
  switch (t) {
    case PdTransport::kNixl:
      return "NIXL";
    case PdTransport::kDirect:
      return "Direct";
    default:
      return "Mooncake";
  }
}

PdLevel shared_level(const PdReplica& a, const PdReplica& b) {
  if (!a.host.empty() && a.host == b.host) return PdLevel::kHost;
  if (!a.rack.empty() && a.rack == b.rack) return PdLevel::kRack;
  if (!a.zone.empty() && a.zone == b.zone) return PdLevel::kZone;
  return PdLevel::kNone;
}

PdTopologyMap parse_pd_topologies(const json& array) {
  if (!array.is_array()) fail("pdTopologies", "expected an array");
  if (array.size() > kMaxPdTopologies)
    fail("pdTopologies", "more than " + std::to_string(kMaxPdTopologies) + " topologies");
  PdTopologyMap out;
  for (std::size_t i = 0; i < array.size(); ++i) {
    const std::string where = "pdTopologies[" + std::to_string(i) + "]";
    PdTopology t = parse_topology(array[i], where);
    const std::string name = t.name;
    if (!out.emplace(name, std::make_shared<const PdTopology>(std::move(t))).second)
      fail(where + ".name", "\"" + name + "\" is defined twice");
  }
  return out;
}

}  // namespace ic::config
