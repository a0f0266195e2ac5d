// `pdTopologies` of the policy document (docs/pd-routing.md "Topology"):
// every field parsed, the defaults, and each rejection with its exact 400
// reason. Issue 30 acceptance 1 (validation).

#include "config/pd_topology.hh"

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "config/policy.hh"

using namespace ic::config;

namespace {

std::string doc(const std::string& topologies) {
  return R"({"version":7,"pdTopologies":)" + topologies + "}";
}

std::string parse_err(const std::string& topologies) {
  const PolicyParseResult r = parse_policy_json(doc(topologies));
  CHECK_FALSE(r.ok());
  return r.error;
}

}  // namespace

TEST_CASE("pdTopologies: every field, and the source document kept") {
  const std::string body = doc(R"([{"name":"pd","transport":"NIXL",
    "prefill":[{"replica":"p0","host":"h0","rack":"r0","zone":"z0"}],
    "decode":[{"replica":"d0","host":"h1","rack":"r0","zone":"z0","slots":4},{"replica":"d1","rack":"r9"}],
    "requiredDomain":"rack","disaggregation":{"minUncachedTokens":512},
    "decodeHoldMs":2500,"affinityWeight":0.25}])");
  const PolicyParseResult r = parse_policy_json(body);
  INFO(r.error);
  REQUIRE(r.ok());
  CHECK(r.set->source_json() == body);
  CHECK(r.set->pd_topology("other") == nullptr);
  const PdTopology* t = r.set->pd_topology("pd");
  REQUIRE(t != nullptr);
  CHECK(t->name == "pd");
  CHECK(t->transport == PdTransport::kNixl);
  CHECK(transport_name(t->transport) == "NIXL");
  REQUIRE(t->prefill.size() == 1);
  CHECK(t->prefill[0].replica_id == "p0");
  CHECK(t->prefill[0].host == "h0");
  REQUIRE(t->decode.size() == 2);
  CHECK(t->decode[0].slots == 4);
  CHECK(t->decode[1].slots == 8);  // the default
  CHECK(t->decode[1].zone.empty());
  CHECK(t->required_level == PdLevel::kRack);
  CHECK(t->min_uncached_tokens == 512);
  CHECK(t->decode_hold_us == 2'500'000);
  CHECK(t->affinity_weight == 0.25);
  CHECK(shared_level(t->prefill[0], t->decode[0]) == PdLevel::kRack);
  CHECK(shared_level(t->prefill[0], t->decode[1]) == PdLevel::kNone);
}

TEST_CASE("pdTopologies: the example of docs/pd-routing.md \"Topology\", exactly as written") {
  std::ifstream file(IC_PD_ROUTING_DOC);
  std::stringstream text;
  text << file.rdbuf();
  const std::string all = text.str();
  const std::size_t open = all.find("```json\n", all.find("## Topology"));
  REQUIRE(open != std::string::npos);
  const std::size_t begin = open + 8;
  const std::size_t end = all.find("```", begin);
  REQUIRE(end != std::string::npos);
  const PolicyParseResult r = parse_policy_json(all.substr(begin, end - begin));
  INFO(r.error);
  REQUIRE(r.ok());
  const PdTopology* t = r.set->pd_topology("llama-70b");
  REQUIRE(t != nullptr);
  CHECK(t->transport == PdTransport::kNixl);
  REQUIRE(t->prefill.size() == 2);
  REQUIRE(t->decode.size() == 2);
  CHECK(t->decode[0].slots == 16);
  CHECK(t->decode[1].slots == 8);
  CHECK(t->decode[1].zone == "us-east-1b");
  CHECK(t->required_level == PdLevel::kNone);
  CHECK(t->min_uncached_tokens == 2048);
  CHECK(t->decode_hold_us == 60'000'000);
  CHECK(t->affinity_weight == 0.5);
}

TEST_CASE("pdTopologies: the defaults, and a document without them") {
  const PolicyParseResult r =
      parse_policy_json(doc(R"([{"name":"a","transport":"Direct","decode":[{"replica":"d"}]}])"));
  REQUIRE(r.ok());
  const PdTopology* t = r.set->pd_topology("a");
  REQUIRE(t != nullptr);
  CHECK(t->transport == PdTransport::kDirect);
  CHECK(t->prefill.empty());
  CHECK(t->required_level == PdLevel::kNone);
  CHECK(t->min_uncached_tokens == 2048);
  CHECK(t->decode_hold_us == 60'000'000);
  CHECK(t->affinity_weight == 0.5);
  const PolicyParseResult plain = parse_policy_json(R"({"version":7,"policies":[]})");
  REQUIRE(plain.ok());
  CHECK(plain.set->pd_topologies().empty());
  CHECK(parse_policy_json(R"({"version":7,"pdTopologies":null})").ok());
}

TEST_CASE("pdTopologies: each error names the field") {
  const std::string d = R"("decode":[{"replica":"d"}])";
  CHECK(parse_err(R"({})") == "pdTopologies: expected an array");
  CHECK(parse_err(R"([1])") == "pdTopologies[0]: expected an object");
  CHECK(parse_err(R"([{"transport":"NIXL",)" + d + "}]") == "pdTopologies[0]: missing name");
  CHECK(parse_err(R"([{"name":"","transport":"NIXL",)" + d + "}]") ==
        "pdTopologies[0].name: expected a non-empty name");
  CHECK(parse_err(R"([{"name":"a",)" + d + "}]") == "pdTopologies[0]: missing transport");
  CHECK(parse_err(R"([{"name":"a","transport":"rdma",)" + d + "}]") ==
        "pdTopologies[0].transport: expected \"Mooncake\", \"NIXL\" or \"Direct\"");
  CHECK(parse_err(R"([{"name":"a","transport":"NIXL"}])") == "pdTopologies[0]: missing decode");
  CHECK(parse_err(R"([{"name":"a","transport":"NIXL","decode":[]}])") ==
        "pdTopologies[0].decode: expected at least one replica");
  CHECK(parse_err(R"([{"name":"a","transport":"NIXL","decode":{}}])") ==
        "pdTopologies[0].decode: expected an array");
  CHECK(parse_err(R"([{"name":"a","transport":"NIXL","decode":[{"host":"h"}]}])") ==
        "pdTopologies[0].decode[0]: missing replica");
  CHECK(parse_err(R"([{"name":"a","transport":"NIXL","decode":[{"replica":""}]}])") ==
        "pdTopologies[0].decode[0].replica: expected a non-empty replica id");
  CHECK(parse_err(
            R"([{"name":"a","transport":"NIXL","decode":[{"replica":"d"},{"replica":"d"}]}])") ==
        "pdTopologies[0].decode[1].replica: \"d\" is listed twice");
  CHECK(parse_err(R"([{"name":"a","transport":"NIXL","decode":[{"replica":"d","slots":0}]}])") ==
        "pdTopologies[0].decode[0].slots: expected an integer in 1..65536");
  CHECK(parse_err(R"([{"name":"a","transport":"NIXL","decode":[{"replica":"d","gpu":"h100"}]}])") ==
        "unknown field \"gpu\" in pdTopologies[0].decode[0]");
  CHECK(parse_err(R"([{"name":"a","transport":"NIXL","prefill":[{"replica":"p","slots":2}],)" + d +
                  "}]") == "unknown field \"slots\" in pdTopologies[0].prefill[0]");
  CHECK(parse_err(R"([{"name":"a","transport":"NIXL","requiredDomain":"region",)" + d + "}]") ==
        "pdTopologies[0].requiredDomain: expected \"host\", \"rack\", \"zone\" or \"\"");
  CHECK(parse_err(R"([{"name":"a","transport":"NIXL","requiredDomain":"zone",)" + d + "}]") ==
        "pdTopologies[0].requiredDomain: replica \"d\" has no zone");
  CHECK(parse_err(R"([{"name":"a","transport":"NIXL","disaggregation":{"minUncachedTokens":-1},)" +
                  d + "}]") ==
        "pdTopologies[0].disaggregation.minUncachedTokens: expected an integer in 0..2147483648");
  CHECK(parse_err(R"([{"name":"a","transport":"NIXL","decodeHoldMs":0,)" + d + "}]") ==
        "pdTopologies[0].decodeHoldMs: expected an integer in 1..3600000");
  CHECK(parse_err(R"([{"name":"a","transport":"NIXL","affinityWeight":-1,)" + d + "}]") ==
        "pdTopologies[0].affinityWeight: expected a number >= 0");
  CHECK(parse_err(R"([{"name":"a","transport":"NIXL",)" + d +
                  R"(},{"name":"a","transport":"NIXL",)" + d + "}]") ==
        "pdTopologies[1].name: \"a\" is defined twice");
  CHECK(parse_err(R"([{"name":"a","transport":"NIXL","mode":"x",)" + d + "}]") ==
        "unknown field \"mode\" in pdTopologies[0]");
  std::string many = "[";
  for (int i = 0; i <= 64; ++i) {
    many += std::string(i ? "," : "") + R"({"name":"t)" + std::to_string(i) +
            R"(","transport":"NIXL",)" + d + "}";
  }
  CHECK(parse_err(many + "]") == "pdTopologies: more than 64 topologies");
}
