// CachePolicy JSON parsing and normalization (docs/policy.md).

#include "config/policy.hh"

#include <doctest/doctest.h>

#include <string>

using namespace ic::config;

namespace {
std::shared_ptr<const PolicySet> parse_ok(const std::string& body) {
  PolicyParseResult r = parse_policy_json(body);
  INFO("error: " << r.error);
  REQUIRE(r.ok());
  CHECK(r.error.empty());
  return r.set;
}
std::string parse_err(const std::string& body) {
  PolicyParseResult r = parse_policy_json(body);
  CHECK_FALSE(r.ok());
  CHECK(r.set == nullptr);
  return r.error;
}
}  // namespace

TEST_CASE("the v7 example of docs/policy.md parses") {
  auto s = parse_ok(
      R"({"version":7,"policies":[{"namespace":"team-a","routingFloorScore":0}],"tenants":[{"tenantID":"tenant-a","maxIndexEntries":10}]})");
  CHECK(s->policy_count() == 1);
  const CachePolicy& p = s->policy_for("team-a");
  CHECK(p.routing_floor_score == 0.0);
  CHECK(p.minimum_matched_tokens == 64);
  CHECK(p.affinity_routing);
  CHECK(p.enable_chain_matching);
  CHECK_FALSE(p.require_chain);
  CHECK(p.enable_tenant_hot);
  CHECK(p.eviction == EvictionAlgorithm::kLru);
  CHECK(p.eviction_ttl_us == 0);
  REQUIRE(s->quota_for("tenant-a") != nullptr);
  CHECK(s->quota_for("tenant-a")->max_index_entries == 10);
  CHECK(s->quota_for("team-a") == nullptr);
  // A tenant without a policy gets the defaults.
  CHECK(s->policy_for("other") == CachePolicy{});
  CHECK(s->policy_for("other").routing_floor_score == 0.1);
}

TEST_CASE("every field of a full v7 policy") {
  auto s = parse_ok(R"({ "version": 7,
    "policies": [ { "namespace": "team-a", "evictionTTL": 1800000000000,
      "minimumPrefixTokens": 32, "minimumMatchedTokens": 0, "routingFloorScore": 0.25,
      "lookupTimeoutMs": 5, "affinityRouting": false, "eviction": "lfu",
      "strategy": { "enableChainMatching": true, "requireChain": true, "enableTenantHot": false } } ],
    "tenants": [ { "tenantID": "tenant-a", "maxIndexEntries": 10, "isolationMode": "Fairness" } ] })");
  const CachePolicy& p = s->policy_for("team-a");
  CHECK(p.eviction_ttl_us == 1800000000);
  CHECK(p.minimum_prefix_tokens == 32);
  CHECK(p.minimum_matched_tokens == 0);  // v7: 0 disables the floor
  CHECK(p.routing_floor_score == 0.25);
  CHECK(p.lookup_timeout_ms == 5);
  CHECK_FALSE(p.affinity_routing);
  CHECK(p.eviction == EvictionAlgorithm::kLfu);
  CHECK(p.require_chain);
  CHECK_FALSE(p.enable_tenant_hot);
  CHECK(s->quota_for("tenant-a")->isolation_mode == "Fairness");
}

TEST_CASE("older versions are normalized") {
  SUBCASE("v3: minimumMatchedTokens 0 means 64") {
    auto s = parse_ok(R"({"version":3,"policies":[{"namespace":"a","minimumMatchedTokens":0}]})");
    CHECK(s->policy_for("a").minimum_matched_tokens == 64);
  }
  SUBCASE("v4: minimumMatchedTokens 0 disables") {
    auto s = parse_ok(R"({"version":4,"policies":[{"namespace":"a","minimumMatchedTokens":0}]})");
    CHECK(s->policy_for("a").minimum_matched_tokens == 0);
  }
  SUBCASE("v4: missing routingFloorScore means 0.1; explicit 0 stays") {
    auto s = parse_ok(
        R"({"version":4,"policies":[{"namespace":"a"},{"namespace":"b","routingFloorScore":0}]})");
    CHECK(s->policy_for("a").routing_floor_score == 0.1);
    CHECK(s->policy_for("b").routing_floor_score == 0.0);
  }
  SUBCASE("v5: strategy defaults true/false/true, partial strategy keeps the rest") {
    auto s = parse_ok(
        R"({"version":5,"policies":[{"namespace":"a"},{"namespace":"b","strategy":{"enableTenantHot":false}}]})");
    CHECK(s->policy_for("a").enable_chain_matching);
    CHECK_FALSE(s->policy_for("a").require_chain);
    CHECK(s->policy_for("a").enable_tenant_hot);
    CHECK(s->policy_for("b").enable_chain_matching);
    CHECK_FALSE(s->policy_for("b").enable_tenant_hot);
  }
  SUBCASE("v6: missing affinityRouting means true") {
    auto s = parse_ok(R"({"version":6,"policies":[{"namespace":"a","minimumMatchedTokens":0}]})");
    CHECK(s->policy_for("a").affinity_routing);
    CHECK(s->policy_for("a").minimum_matched_tokens == 0);
  }
}

TEST_CASE("normalizations of values") {
  auto s = parse_ok(R"({"version":7,
    "policies":[{"namespace":"a","routingFloorScore":-2.5,"lookupTimeoutMs":-3,"evictionTTL":-5},
                {"namespace":"","routingFloorScore":0.9}],
    "tenants":[{"tenantID":"neg","maxIndexEntries":-7},{"tenantID":"","maxIndexEntries":3},
               {"tenantID":"inferencecache.io/probe","maxIndexEntries":1}]})");
  CHECK(s->policy_for("a").routing_floor_score == 0.0);
  CHECK(s->policy_for("a").lookup_timeout_ms == 0);
  CHECK(s->policy_for("a").eviction_ttl_us == 0);
  CHECK(s->policy_count() == 1);  // empty namespace dropped
  CHECK(s->quota_for("neg")->max_index_entries == 0);
  CHECK(s->quota_count() == 1);  // empty tenantID dropped, reserved tenant never has a quota
  CHECK(s->quota_for("inferencecache.io/probe") == nullptr);
  CHECK(s->quota_for("") == nullptr);
}

TEST_CASE("empty documents and defaults") {
  auto s = parse_ok(R"({"version":7})");
  CHECK(s->policy_count() == 0);
  CHECK(s->quota_count() == 0);
  auto d = PolicySet::defaults();
  CHECK(d->policy_for("x") == CachePolicy{});
  CHECK(d->quota_for("x") == nullptr);
  auto n = parse_ok(R"({"version":7,"policies":null,"tenants":[]})");
  CHECK(n->policy_count() == 0);
}

TEST_CASE("errors carry a reason") {
  CHECK(parse_err(R"({"version":7,"bogus":1})") == "unknown field \"bogus\" in document");
  CHECK(parse_err(R"({"version":7,"policies":[{"namespace":"a","colour":"red"}]})") ==
        "unknown field \"colour\" in policies[0]");
  CHECK(parse_err(R"({"version":7,"policies":[{"namespace":"a","strategy":{"x":true}}]})") ==
        "unknown field \"x\" in policies[0].strategy");
  CHECK(parse_err(R"({"version":7,"tenants":[{"tenantID":"a","quota":1}]})") ==
        "unknown field \"quota\" in tenants[0]");
  CHECK(parse_err(R"({"version":7} {})") == "trailing data after the JSON document");
  CHECK(parse_err(R"({"version":7} x)") == "trailing data after the JSON document");
  CHECK(parse_err(R"({"version":8})") == "unsupported version 8 (accepted 3..7)");
  CHECK(parse_err(R"({"version":2})") == "unsupported version 2 (accepted 3..7)");
  CHECK(parse_err(R"({"policies":[]})") == "missing version");
  CHECK(parse_err(R"({"version":"7"})") == "version: expected an integer");
  CHECK(
      parse_err(
          R"({"version":7,"policies":[{"namespace":"a","strategy":{"enableChainMatching":false,"requireChain":true}}]})") ==
      "policies[0]: requireChain needs enableChainMatching");
  CHECK(parse_err(R"({"version":7,"policies":[{"namespace":"a","eviction":"fifo"}]})") ==
        "policies[0].eviction: expected \"lru\" or \"lfu\"");
  CHECK(parse_err(R"({"version":7,"policies":[{"namespace":"a","lookupTimeoutMs":1.5}]})") ==
        "policies[0].lookupTimeoutMs: expected an integer");
  CHECK(parse_err(
            R"({"version":7,"policies":[{"namespace":"a","minimumPrefixTokens":4294967296}]})") ==
        "policies[0].minimumPrefixTokens: out of range");
  CHECK(parse_err(R"({"version":7,"policies":[{"namespace":"a","affinityRouting":"yes"}]})") ==
        "policies[0].affinityRouting: expected a boolean");
  CHECK(parse_err(R"({"version":7,"policies":{}})") == "policies: expected an array");
  CHECK(parse_err(R"([])") == "document: expected an object");
  CHECK(parse_err("").rfind("invalid JSON", 0) == 0);
  // A number beyond double is nlohmann's out_of_range, not a parse_error (found by fuzzing).
  CHECK(parse_err(R"({"version":7,"policies":[{"namespace":"a","routingFloorScore":1e400}]})")
            .rfind("invalid JSON", 0) == 0);
  CHECK(parse_err("{\"version\":7").rfind("invalid JSON", 0) == 0);
}

TEST_CASE("a later duplicate namespace replaces an earlier one") {
  auto s = parse_ok(
      R"({"version":7,"policies":[{"namespace":"a","lookupTimeoutMs":1},{"namespace":"a","lookupTimeoutMs":2}]})");
  CHECK(s->policy_count() == 1);
  CHECK(s->policy_for("a").lookup_timeout_ms == 2);
}

TEST_CASE("ranking and loadAware (docs/ranking.md)") {
  auto s = parse_ok(
      R"({"version":7,"policies":[{"namespace":"a","ranking":"reference"},)"
      R"({"namespace":"b","ranking":"load-aware","loadAware":{"loadCostTokens":256,"loadWindow":32,"pressureLoad":0,"saturationPressure":0.9}},)"
      R"({"namespace":"c","loadAware":{"loadWindow":1}},{"namespace":"d","ranking":""},)"
      R"({"namespace":"e","ranking":"work-aware"}]})");
  CHECK(s->policy_for("a").ranking == Ranking::kReference);
  CHECK(s->policy_for("a").load_aware == LoadAwareKnobs{});
  const CachePolicy& b = s->policy_for("b");
  CHECK(b.ranking == Ranking::kLoadAware);
  CHECK(b.load_aware == LoadAwareKnobs{256.0, 32.0, 0.0, 0.9});
  CHECK(s->policy_for("c").ranking == Ranking::kServerDefault);
  CHECK(s->policy_for("c").load_aware == LoadAwareKnobs{-1.0, 1.0, -1.0, -1.0});
  CHECK(s->policy_for("d").ranking == Ranking::kServerDefault);
  CHECK(s->policy_for("e").ranking == Ranking::kWorkAware);
  CHECK(s->policy_for("none").ranking == Ranking::kServerDefault);
  CHECK(s->policy_for("none").load_aware == LoadAwareKnobs{});

  auto p = [](const std::string& fields) {
    return R"({"version":7,"policies":[{"namespace":"a",)" + fields + "}]}";
  };
  CHECK(parse_err(p(R"("ranking":"fastest")")) ==
        "policies[0].ranking: expected \"reference\", \"load-aware\" or \"work-aware\"");
  CHECK(parse_err(p(R"("ranking":1)")) == "policies[0].ranking: expected a string");
  CHECK(parse_err(p(R"("loadAware":{"loadCostTokens":-1})")) ==
        "policies[0].loadAware.loadCostTokens: expected a number >= 0");
  CHECK(parse_err(p(R"("loadAware":{"loadWindow":0.5})")) ==
        "policies[0].loadAware.loadWindow: expected a number >= 1");
  CHECK(parse_err(p(R"("loadAware":{"pressureLoad":"8"})")) ==
        "policies[0].loadAware.pressureLoad: expected a number");
  CHECK(parse_err(p(R"("loadAware":{"spread":1})")) ==
        "unknown field \"spread\" in policies[0].loadAware");
  CHECK(parse_err(p(R"("loadAware":[])")) == "policies[0].loadAware: expected an object");
}
