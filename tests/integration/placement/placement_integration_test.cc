// A spread tenant (docs/placement.md) through the real inferencecache-server
// with grpc++ on two cores: every connection, whichever core it lands on,
// answers like the owner once the owner's changes were forwarded (polled,
// never slept), without a cross-core post for the tenant's lookups; a
// tenant that is not spread is unchanged; GetCacheState reads the owner
// only; a warm restart seeds the copies before the first call.

#include <doctest/doctest.h>

#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../admin/http_client.hh"
#include "index/partition.hh"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "support/builders.hh"
#include "support/grpc_channel.hh"
#include "support/server_process.hh"
#include "support/temp_dir.hh"
#include "support/text.hh"

namespace pb = inferencecache::v1alpha1;
using ic::itest::deadline_in;
using namespace std::chrono_literals;

namespace {

constexpr unsigned kCores = 2;
constexpr int kConnections = 8;

std::int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The first "<stem>N" owned by core `core` of kCores.
std::string tenant_on(unsigned core, const std::string& stem) {
  for (int i = 0;; ++i) {
    std::string t = ic::itest::numbered(stem, i);
    if (ic::index::owner_core(t, kCores) == core) return t;
  }
}

pb::LookupRouteRequest chain_req(const std::string& tenant, const std::vector<std::uint64_t>& b) {
  pb::LookupRouteRequest r;
  r.set_tenant_id(tenant);
  r.set_model_id("m");
  r.set_hash_scheme("vllm");
  for (std::uint64_t x : b) {
    r.add_block_hashes(ic::test::block_hash(x));
    r.add_block_token_counts(16);
  }
  return r;
}

// The server, and kConnections separate connections (SO_REUSEPORT spreads
// them over both cores).
struct Spread {
  ic::itest::ServerProcess server;
  std::vector<std::unique_ptr<pb::InferenceCache::Stub>> stubs;

  explicit Spread(std::vector<std::string> extra) : server(options(std::move(extra))) {
    for (int c = 0; c < kConnections; ++c) {
      grpc::ChannelArguments args;
      args.SetInt("ic.test.connection", c);
      stubs.push_back(
          pb::InferenceCache::NewStub(ic::itest::insecure_channel(server.grpc_port(), args)));
    }
  }
  static ic::itest::ServerOptions options(std::vector<std::string> extra) {
    ic::itest::ServerOptions o;
    o.extra_args = {"--threads", "2", "--ranking", "reference"};
    o.extra_args.insert(o.extra_args.end(), extra.begin(), extra.end());
    return o;
  }
  void report(const std::vector<pb::CacheStateUpdate>& updates) {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(10s));
    pb::Ack ack;
    auto writer = stubs[0]->ReportCacheState(&ctx, &ack);
    for (const auto& u : updates) REQUIRE(writer->Write(u));
    REQUIRE(writer->WritesDone());
    REQUIRE(writer->Finish().ok());
  }
  void publish(const pb::CacheEvent& e) {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(10s));
    pb::Ack ack;
    REQUIRE(stubs[0]->PublishEvent(&ctx, e, &ack).ok());
  }
  pb::LookupRouteResponse lookup(int c, const pb::LookupRouteRequest& r) {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(10s));
    pb::LookupRouteResponse out;
    const grpc::Status st = stubs[c]->LookupRoute(&ctx, r, &out);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
    return out;
  }
  // "<reason> <replica>:<matched> ..." of one answer.
  static std::string summary(const pb::LookupRouteResponse& r) {
    std::string s = r.reason_code();
    for (const auto& x : r.replica_scores()) {
      s += " " + x.replica_id() + ":" + std::to_string(x.matched_tokens());
    }
    return s;
  }
  // Polls until every connection answers `r` with `want` (the copies follow
  // the owner within a forwarding delay); false after 20 s.
  bool all_answer(const pb::LookupRouteRequest& r, const std::string& want) {
    const auto give_up = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < give_up) {
      bool all = true;
      for (int c = 0; c < kConnections && all; ++c) all = summary(lookup(c, r)) == want;
      if (all) return true;
      std::this_thread::sleep_for(10ms);
    }
    for (int c = 0; c < kConnections; ++c) MESSAGE(c, ": ", summary(lookup(c, r)));
    return false;
  }
  // Sum over the cores of inferencecache_core_cross_core_posts_total.
  double cross_core_posts() {
    const std::string body = ic::itest::http_request(server.http_port(), "GET", "/metrics").body;
    std::istringstream lines(body);
    double sum = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("inferencecache_core_cross_core_posts_total{", 0) != 0) continue;
      sum += std::stod(line.substr(line.rfind(' ') + 1));
    }
    return sum;
  }
};

}  // namespace

TEST_CASE("a spread tenant answers alike on every connection, without hops") {
  const std::string spread = tenant_on(1, "spread-");
  const std::string plain = tenant_on(1, "plain-");
  Spread s({"--spread-tenants", spread});
  const std::int64_t future = wall_us() + 3'600'000'000;
  s.report({ic::test::chain_update(spread, "m", "vllm", "r1", future, {1, 2, 3, 4, 5, 6, 7, 8}),
            ic::test::chain_update(spread, "m", "vllm", "r2", future, {1, 2, 3, 4}),
            ic::test::chain_update(plain, "m", "vllm", "r1", future, {1, 2, 3, 4})});
  const pb::LookupRouteRequest q = chain_req(spread, {1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(s.all_answer(q, "PREFIX_MATCH r1:128 r2:64"));

  SUBCASE("lookups of the spread tenant post nothing across cores") {
    const double before = s.cross_core_posts();
    for (int round = 0; round < 4; ++round) {
      for (int c = 0; c < kConnections; ++c) {
        CHECK(Spread::summary(s.lookup(c, q)) == "PREFIX_MATCH r1:128 r2:64");
      }
    }
    CHECK(s.cross_core_posts() == before);
    // The plain tenant's lookups still hop to its owner from core 0.
    for (int c = 0; c < kConnections; ++c) {
      CHECK(Spread::summary(s.lookup(c, chain_req(plain, {1, 2, 3, 4}))) == "PREFIX_MATCH r1:64");
    }
    CHECK(s.cross_core_posts() > before);
  }
  SUBCASE("PREFIX_EVICTED then ALL_CLEARED reach every core") {
    pb::CacheEvent e;
    e.set_tenant_id(spread);
    e.set_model_id("m");
    e.set_replica_id("r1");
    e.set_type(pb::CacheEvent::PREFIX_EVICTED);
    e.set_prefix_hash(ic::test::block_hash(8));
    s.publish(e);
    CHECK(s.all_answer(q, "PREFIX_MATCH r1:112 r2:64"));
    e.set_type(pb::CacheEvent::ALL_CLEARED);
    e.clear_prefix_hash();
    s.publish(e);
    CHECK(s.all_answer(q, "PREFIX_MATCH r2:64"));
  }
  SUBCASE("GetCacheState reads the owner: the copies are not counted twice") {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(10s));
    pb::GetCacheStateRequest g;
    g.set_tenant_id(spread);
    g.set_model_id("m");
    pb::GetCacheStateResponse out;
    REQUIRE(s.stubs[0]->GetCacheState(&ctx, g, &out).ok());
    CHECK(out.summary().total_prefixes() == 8);
  }
  CHECK(s.server.stop() == 0);
}

TEST_CASE("a warm restart seeds the copies before the first call") {
  ic::test::TempDir dir("ic-placement");
  const std::string state = dir.file("state.bin");
  const std::string spread = tenant_on(0, "spread-");
  const std::int64_t future = wall_us() + 3'600'000'000;
  {
    Spread s({"--state-file", state});
    s.report({ic::test::chain_update(spread, "m", "vllm", "r1", future, {11, 12, 13, 14})});
    CHECK(s.server.stop() == 0);  // saves the state file
  }
  Spread s({"--state-file", state, "--spread-tenants", spread, "--spread-cores", "2"});
  for (int c = 0; c < kConnections; ++c) {
    CHECK(Spread::summary(s.lookup(c, chain_req(spread, {11, 12, 13, 14}))) ==
          "PREFIX_MATCH r1:64");
  }
  CHECK(s.server.stop() == 0);
}
