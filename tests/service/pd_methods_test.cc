// LookupPDRoute's handler on a two-core index (service/pd_methods.hh): the
// owner core answers; a late owner loses to the grpc-timeout guard with the
// contract's TIMEOUT, as LookupRoute's does; every answer is counted in
// inferencecache_lookup_pd_route_* (sharding/pd_metrics.hh); prompt_text is
// tokenized on the connection's core as LookupRoute's.

#include <doctest/doctest.h>

#include <memory>
#include <string>

#include "../tokenizer/small_tokenizer.hh"
#include "config/policy.hh"
#include "index/partition.hh"
#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "metrics/core_metrics.hh"
#include "metrics/prometheus.hh"
#include "metrics/registry.hh"
#include "prompt_text/models.hh"
#include "prompt_text/scheduler.hh"
#include "service/prompt_input.hh"
#include "service_fixture.hh"
#include "sharding/pd_metrics.hh"
#include "sharding/sharded_index.hh"
#include "two_core_index.hh"

namespace pb = ::inferencecache::v1alpha1;
using ic::test::frame;
using ic::test::unframe;

namespace {

constexpr std::string_view kMethod = "/inferencecache.v1alpha1.InferenceCache/LookupPDRoute";

// One prefill and one decode replica: a long miss is a pair.
constexpr const char* kTopology = R"({"version":7,"policies":[],"pdTopologies":[
  {"name":"pd","transport":"NIXL","prefill":[{"replica":"p0"}],"decode":[{"replica":"d0"}]}]})";

// First tenant name "tenant-N" owned by `core` of 2.
std::string tenant_on(unsigned core) {
  for (int i = 0;; ++i) {
    std::string t = "tenant-" + std::to_string(i);
    if (ic::index::owner_core(t, 2) == core) return t;
  }
}

// Eight 512-token blocks.
pb::LookupPDRouteRequest pd_req(const std::string& tenant) {
  pb::LookupPDRouteRequest r;
  r.set_model_id("m");
  r.set_tenant_id(tenant);
  r.set_hash_scheme("s");
  r.set_pd_topology_ref("pd");
  for (int i = 0; i < 8; ++i) {
    r.add_block_hashes(std::string(8, static_cast<char>('a' + i)));
    r.add_block_token_counts(512);
  }
  return r;
}

// Two cores, the connection on core 0, both shards holding the topology;
// the pd families registered and counted on this thread (core 0).
struct Routed : ic::test::TwoCoreIndex {
  Routed() : registry(1) {
    auto parsed = ic::config::parse_policy_json(kTopology);
    INFO(parsed.error);
    REQUIRE(parsed.ok());
    shard0.set_policies(parsed.set);
    shard1.set_policies(parsed.set);
    ic::sharding::register_pd_metrics(registry);
    registry.bind_current_thread(0);
    ic::service::GrpcServiceOptions o;
    o.index = &index;
    svc = std::make_unique<ic::test::ServiceFixture>(o);
  }
  // Moves both manual clocks (the gRPC timers, the index clock, the link).
  void advance(std::int64_t us) {
    clock.mono += us;
    svc->timers.advance(us);
    link.advance(us);
  }
  std::int32_t start(const pb::LookupPDRouteRequest& req,
                     std::vector<std::pair<std::string, std::string>> extra = {}) {
    const auto id = svc->client.grpc_call(std::string(kMethod), frame(req.SerializeAsString()),
                                          true, std::move(extra));
    svc->run();
    return id;
  }
  void settle() {
    link.run();
    svc->run();
  }
  // The pd families as /metrics renders them (this thread counts as core 0).
  std::string scraped() {
    const std::string all = ic::metrics::render_prometheus(
        registry.core(0).collect(), ic::metrics::ProcessFigures{}, registry.registrations());
    const auto from = all.find("# HELP inferencecache_lookup_pd_route_calls_total");
    const auto to = all.find("inferencecache_lookup_pd_route_latency_seconds_bucket");
    return from == std::string::npos || to == std::string::npos ? all : all.substr(from, to - from);
  }

  ic::metrics::Registry registry;
  std::unique_ptr<ic::test::ServiceFixture> svc;
};

}  // namespace

TEST_CASE_FIXTURE(Routed, "the owner core answers the pair") {
  const auto id = start(pd_req(tenant_on(1)));
  CHECK(svc->client.streams[id].body.empty());  // waiting for core 1
  settle();
  const auto resp = svc->single<pb::LookupPDRouteResponse>(id);
  CHECK(resp.reason_code() == "DISAGGREGATED");
  CHECK(resp.prefill_replica_id() == "p0");
  CHECK(resp.decode_replica_id() == "d0");
  CHECK(svc->client.streams[id].trailer("grpc-status") == "0");
}

TEST_CASE_FIXTURE(Routed,
                  "a late owner answer loses to the grpc-timeout guard: TIMEOUT, then a no-op") {
  const auto id = start(pd_req(tenant_on(1)), {{"grpc-timeout", "10m"}});
  CHECK(link.pending_timers() == 1);
  advance(9'999);
  svc->run();
  CHECK(svc->client.streams[id].body.empty());
  advance(1);
  svc->run();
  const auto resp = svc->single<pb::LookupPDRouteResponse>(id);
  CHECK(resp.ShortDebugString() == R"(reason_code: "TIMEOUT" lookup_latency_us: 10000)");
  CHECK(svc->client.streams[id].trailer("grpc-status") == "0");
  settle();  // the owner's answer arrives for a finished call
  CHECK(unframe(svc->client.streams[id].body).size() == 1);
  CHECK(link.pending_timers() == 0);
}

TEST_CASE_FIXTURE(Routed, "the owner's answer cancels the guard timer; a local owner arms none") {
  const auto id = start(pd_req(tenant_on(1)), {{"grpc-timeout", "1S"}});
  CHECK(link.pending_timers() == 1);
  settle();
  CHECK(svc->single<pb::LookupPDRouteResponse>(id).reason_code() == "DISAGGREGATED");
  CHECK(link.pending_timers() == 0);
  const auto here = start(pd_req(tenant_on(0)), {{"grpc-timeout", "1S"}});
  CHECK(svc->single<pb::LookupPDRouteResponse>(here).reason_code() == "DISAGGREGATED");
  CHECK(link.pending_timers() == 0);
}

// Every reason shown. The late call is counted twice, as LookupRoute's: the
// guard's TIMEOUT here, and the owner's own TIMEOUT (its deadline passed too).
TEST_CASE_FIXTURE(Routed, "calls are counted by reason code, with their latency") {
  start(pd_req(tenant_on(0)));  // local: DISAGGREGATED, 0 µs
  pb::LookupPDRouteRequest none = pd_req(tenant_on(0));
  none.clear_pd_topology_ref();
  start(none);  // the contract default on this core: NO_HINT
  pb::LookupPDRouteRequest unknown = pd_req(tenant_on(1));
  unknown.set_pd_topology_ref("nope");
  start(unknown);
  settle();  // UNKNOWN_TOPOLOGY on core 1
  start(pd_req(tenant_on(1)), {{"grpc-timeout", "10m"}});
  advance(10'000);
  svc->run();  // TIMEOUT, 10 ms
  settle();    // the owner's TIMEOUT, 10 ms
  const std::string want =
      "# HELP inferencecache_lookup_pd_route_calls_total LookupPDRoute calls by reason code.\n"
      "# TYPE inferencecache_lookup_pd_route_calls_total counter\n"
      "inferencecache_lookup_pd_route_calls_total{reason_code=\"DISAGGREGATED\"} 1\n"
      "inferencecache_lookup_pd_route_calls_total{reason_code=\"DECODE_ONLY_SHORT\"} 0\n"
      "inferencecache_lookup_pd_route_calls_total{reason_code=\"DECODE_ONLY_CACHED\"} 0\n"
      "inferencecache_lookup_pd_route_calls_total{reason_code=\"NO_PREFILL_POOL\"} 0\n"
      "inferencecache_lookup_pd_route_calls_total{reason_code=\"NO_DECODE_IN_DOMAIN\"} 0\n"
      "inferencecache_lookup_pd_route_calls_total{reason_code=\"OVERLOADED\"} 0\n"
      "inferencecache_lookup_pd_route_calls_total{reason_code=\"UNKNOWN_TOPOLOGY\"} 1\n"
      "inferencecache_lookup_pd_route_calls_total{reason_code=\"NO_HINT\"} 1\n"
      "inferencecache_lookup_pd_route_calls_total{reason_code=\"TIMEOUT\"} 2\n"
      "inferencecache_lookup_pd_route_calls_total{reason_code=\"POLICY_REQUIRES_CHAIN\"} 0\n"
      "inferencecache_lookup_pd_route_calls_total{reason_code=\"OTHER\"} 0\n"
      "# HELP inferencecache_lookup_pd_route_latency_seconds LookupPDRoute latency in seconds.\n"
      "# TYPE inferencecache_lookup_pd_route_latency_seconds histogram\n";
  CHECK(scraped() == want);
  const std::string all = ic::metrics::render_prometheus(
      registry.core(0).collect(), ic::metrics::ProcessFigures{}, registry.registrations());
  CHECK(all.find("inferencecache_lookup_pd_route_latency_seconds_sum 0.02\n") != std::string::npos);
  CHECK(all.find("inferencecache_lookup_pd_route_latency_seconds_count 5\n") != std::string::npos);
}

namespace {

// Routed, with prompt_text tokenized by a small model (byte tokens, template
// "U:<text>|A:", as tests/service/prompt_input_test.cc).
struct Tokenizing : Routed {
  Tokenizing() {
    std::string error;
    auto m = ic::prompt_text::ModelSet::load_model(
        "m", ic::test::small_tokenizer({}).dump(),
        R"({"chat_template": "{% for m in messages %}U:{{ m.content }}{% endfor %}{% if add_generation_prompt %}|A:{% endif %}"})",
        error);
    REQUIRE_MESSAGE(m != nullptr, error);
    models.add(std::move(m));
    prompt.models = &models;
    // This core's tokenizing scheduler, as the server gives every core one.
    scheduler = std::make_shared<ic::prompt_text::Scheduler>(
        index.cores(), index.clock(), prompt.slice_us, prompt.max_jobs_per_core,
        prompt.max_jobs_per_tenant);
    ic::service::GrpcServiceOptions o;
    o.index = &index;
    o.prompt_text = &prompt;
    o.prompt_scheduler = scheduler.get();
    svc = std::make_unique<ic::test::ServiceFixture>(o);
  }
  // prompt_text alone (no blocks).
  static pb::LookupPDRouteRequest text_req(const std::string& tenant, std::string text) {
    pb::LookupPDRouteRequest r = pd_req(tenant);
    r.clear_block_hashes();
    r.clear_block_token_counts();
    r.set_prompt_text(std::move(text));
    return r;
  }
  ic::prompt_text::ModelSet models;
  ic::service::PromptTextConfig prompt;
  std::shared_ptr<ic::prompt_text::Scheduler> scheduler;
};

}  // namespace

TEST_CASE_FIXTURE(Routed, "prompt_text without a tokenizer fails open: NO_HINT") {
  const auto id = start(Tokenizing::text_req(tenant_on(1), "hello"));
  settle();
  CHECK(svc->single<pb::LookupPDRouteResponse>(id).reason_code() == "NO_HINT");
}

TEST_CASE_FIXTURE(Tokenizing, "prompt_text is tokenized as LookupRoute's, then routed") {
  // "U:" + 3,000 bytes + "|A:": 3,005 tokens, of which the 187 whole
  // 16-token blocks (2,992 tokens) are hashed; ≥ minUncachedTokens 2,048 and
  // held nowhere: a pair, every one uncached.
  const auto id = start(text_req(tenant_on(1), std::string(3000, 'x')));
  CHECK(svc->client.streams[id].body.empty());  // a job on this core's scheduler
  for (int i = 0; i < 4 && svc->client.streams[id].body.empty(); ++i) settle();
  const auto resp = svc->single<pb::LookupPDRouteResponse>(id);
  CHECK(resp.reason_code() == "DISAGGREGATED");
  CHECK(resp.uncached_tokens() == 2992);
  // A short one on this core: 1,005 tokens, 62 blocks (992 tokens): decode-only.
  const auto short_id = start(text_req(tenant_on(0), std::string(1000, 'y')));
  for (int i = 0; i < 4 && svc->client.streams[short_id].body.empty(); ++i) settle();
  const auto short_resp = svc->single<pb::LookupPDRouteResponse>(short_id);
  CHECK(short_resp.reason_code() == "DECODE_ONLY_SHORT");
  CHECK(short_resp.decode_replica_id() == "d0");
  CHECK(short_resp.uncached_tokens() == 992);
}
