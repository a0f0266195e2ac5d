// Warm restart through the real server (docs/persistence.md): a server
// stopped with SIGTERM, or killed after a periodic save, comes back with the
// same LookupRoute answers and the policy pushed to /policy (with its P/D
// topologies: the same LookupPDRoute answers); a corrupt,
// truncated or other-version state file starts it cold, counted in /metrics.
// Clients: grpc++ and raw HTTP/1.1. Timestamps lie in the future so every
// entry stays exactly fresh (fresh = 1) across the restart. The servers rank
// with the reference ranking: the load-aware one's hint counts are transient
// load, deliberately not saved (docs/persistence.md).
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "../admin/http_client.hh"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "support/builders.hh"
#include "support/grpc_channel.hh"
#include "support/server_process.hh"
#include "support/temp_dir.hh"

namespace pb = inferencecache::v1alpha1;
using ic::itest::report_cache_state;
using namespace std::chrono_literals;

namespace {

// A server on `state_file` (2 cores, saves every 200 ms).
struct Served {
  ic::itest::ServerProcess server;
  std::shared_ptr<grpc::Channel> channel = ic::itest::insecure_channel(server.grpc_port());
  std::unique_ptr<pb::InferenceCache::Stub> stub = pb::InferenceCache::NewStub(channel);

  explicit Served(const std::string& state_file) : server(options(state_file)) {}
  static ic::itest::ServerOptions options(const std::string& state_file) {
    ic::itest::ServerOptions o;
    o.extra_args = {"--threads",    "2",        "--insecure-disable-auth", "--ranking", "reference",
                    "--state-file", state_file, "--state-save-interval",   "200ms"};
    return o;
  }

  void report(const std::vector<pb::CacheStateUpdate>& updates) {
    pb::Ack ack;
    const grpc::Status st = report_cache_state(*stub, updates, &ack);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
  }
  // The answer as comparable text (itest::lookup_text); a failed call fails the test.
  std::string lookup(const pb::LookupRouteRequest& r) {
    std::string text = ic::itest::lookup_text(*stub, r);
    REQUIRE_MESSAGE(text.rfind("error: ", 0) != 0, text);
    return text;
  }
  std::string metrics() {
    return ic::itest::http_request(server.http_port(), "GET", "/metrics").body;
  }
  // Waits until /metrics shows at least `n` good saves.
  void wait_saves(int n) {
    for (int i = 0; i < 400; ++i) {
      const std::string m = metrics();
      const std::string key = "inferencecache_state_saves_total{result=\"ok\"} ";
      const auto at = m.find(key);
      if (at != std::string::npos && std::stoi(m.substr(at + key.size())) >= n) return;
      std::this_thread::sleep_for(50ms);
    }
    FAIL("no state file save within 20 s");
  }
};

std::vector<std::string> answers(Served& s) {
  std::vector<std::string> out;
  for (const auto& p : ic::test::two_replica_probes(9)) out.push_back(s.lookup(p));
  return out;
}

// tenant-0's policy: a routing floor no score reaches, so its lookups are
// not PREFIX_MATCH; it must survive the restart without --policy-file.
constexpr const char* kPolicy =
    R"({"version":7,"policies":[{"namespace":"tenant-0","routingFloorScore":1e9}]})";

TEST_CASE("SIGTERM saves the index and the pushed policy; the restarted server answers the same") {
  ic::test::TempDir dir("ic-warm");
  std::vector<std::string> before;
  {
    Served s(dir.file("state.bin"));
    CHECK(s.metrics().find("inferencecache_state_loads_total{result=\"missing\"} 1") !=
          std::string::npos);
    s.report(ic::test::two_replica_workload(0, 8, ic::test::hour_from_now_us()));
    CHECK(ic::itest::http_request(s.server.snapshot_port(), "POST", "/policy", kPolicy).status ==
          204);
    before = answers(s);
    CHECK(before[1].find("PREFIX_MATCH") != std::string::npos);
    CHECK(before[0].find("PREFIX_MATCH") == std::string::npos);
    CHECK(s.server.stop() == 0);
  }
  Served again(dir.file("state.bin"));
  const std::string m = again.metrics();
  CHECK(m.find("inferencecache_state_loads_total{result=\"ok\"} 1") != std::string::npos);
  CHECK(m.find("inferencecache_state_restored_entries 48") != std::string::npos);
  CHECK(answers(again) == before);
  CHECK(again.server.stop() == 0);
}

// A P/D topology (docs/pd-routing.md "Topology"): two prefill replicas, one
// decode replica beside p1.
constexpr const char* kPdPolicy = R"({"version":7,"pdTopologies":[{"name":"pd",
  "transport":"Mooncake","prefill":[{"replica":"p0","host":"h0"},{"replica":"p1","host":"h1"}],
  "decode":[{"replica":"d0","host":"h1"}]}]})";

TEST_CASE("a P/D topology pushed to /policy survives the restart; a bad one is a 400") {
  ic::test::TempDir dir("ic-warm");
  // Tenant "pd-new" is unknown to the index: the answer is priced from the
  // topology alone and books nothing, so it is the same before and after.
  const auto request = ic::itest::pd_request("pd-new", "pd", 100, 8);
  {
    Served s(dir.file("state.bin"));
    const auto bad = ic::itest::http_request(s.server.snapshot_port(), "POST", "/policy",
                                             R"({"version":7,"pdTopologies":[{"name":"pd",
        "transport":"RDMA","decode":[{"replica":"d0"}]}]})");
    CHECK(bad.status == 400);
    CHECK(bad.body == "pdTopologies[0].transport: expected \"Mooncake\", \"NIXL\" or \"Direct\"");
    CHECK(ic::itest::pd_lookup_text(*s.stub, request) == R"(reason_code: "UNKNOWN_TOPOLOGY")");
    CHECK(ic::itest::http_request(s.server.snapshot_port(), "POST", "/policy", kPdPolicy).status ==
          204);
    CHECK(ic::itest::pd_lookup_text(*s.stub, request) ==
          R"(prefill_replica_id: "p1" decode_replica_id: "d0" transport_hint: "Mooncake" )"
          R"(reason_code: "DISAGGREGATED" prefill_score: 0.5 decode_score: 1 )"
          R"(uncached_tokens: 4096)");
    CHECK(s.server.stop() == 0);
  }
  Served again(dir.file("state.bin"));
  CHECK(ic::itest::http_request(again.server.snapshot_port(), "GET", "/policy").body ==
        std::string(kPdPolicy) + "\n");
  CHECK(ic::itest::pd_lookup_text(*again.stub, request) ==
        R"(prefill_replica_id: "p1" decode_replica_id: "d0" transport_hint: "Mooncake" )"
        R"(reason_code: "DISAGGREGATED" prefill_score: 0.5 decode_score: 1 )"
        R"(uncached_tokens: 4096)");
  CHECK(again.server.stop() == 0);
}

TEST_CASE("after kill -9 the last periodic save comes back") {
  ic::test::TempDir dir("ic-warm");
  std::vector<std::string> before;
  {
    Served s(dir.file("state.bin"));
    s.report(ic::test::two_replica_workload(0, 8, ic::test::hour_from_now_us()));
    before = answers(s);
    // A save that started after the report holds all of it.
    const std::string m = s.metrics();
    const std::string key = "inferencecache_state_saves_total{result=\"ok\"} ";
    s.wait_saves(std::stoi(m.substr(m.find(key) + key.size())) + 2);
    s.server.signal(SIGKILL);
    CHECK(s.server.wait_exit(10s) == 128 + SIGKILL);
  }
  Served again(dir.file("state.bin"));
  CHECK(again.metrics().find("inferencecache_state_restored_entries 48") != std::string::npos);
  CHECK(answers(again) == before);
  CHECK(again.server.stop() == 0);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_CASE("a truncated, corrupt or other-version state file starts the server cold, counted") {
  ic::test::TempDir dir("ic-warm");
  std::string good;
  {
    Served s(dir.file("state.bin"));
    s.report(ic::test::two_replica_workload(0, 8, ic::test::hour_from_now_us()));
    CHECK(s.server.stop() == 0);
    good = slurp(dir.file("state.bin"));
  }
  REQUIRE(good.size() > 100);
  struct Case {
    const char* result;
    std::string bytes;
  };
  std::string flipped = good;
  flipped[good.size() / 2] = static_cast<char>(flipped[good.size() / 2] ^ 0x40);
  std::string old_version = good;
  old_version[8] = '\0';
  const Case cases[] = {{"truncated", good.substr(0, good.size() / 2)},
                        {"corrupt", flipped},
                        {"wrong_version", old_version}};
  for (const Case& c : cases) {
    CAPTURE(c.result);
    std::ofstream(dir.file("state.bin"), std::ios::binary | std::ios::trunc) << c.bytes;
    Served s(dir.file("state.bin"));
    CHECK(s.metrics().find(std::string("inferencecache_state_loads_total{result=\"") + c.result +
                           "\"} 1") != std::string::npos);
    CHECK(s.metrics().find("inferencecache_state_restored_entries 0") != std::string::npos);
    CHECK(s.lookup(ic::test::two_replica_probes(9)[1]).find("PREFIX_MATCH") == std::string::npos);
    CHECK(s.server.stop() == 0);
    CHECK(s.server.log().find("state file not loaded: starting cold") != std::string::npos);
  }
}

}  // namespace
