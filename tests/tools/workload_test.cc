// The bench's request sets and the cli's chain arguments.
#include <doctest/doctest.h>

#include <set>

#include "bench/workload.hh"
#include "cli/chain_input.hh"
#include "common/grpc_frame.hh"

using namespace ic::tools;
using namespace ic::tools::bench;
namespace v1 = inferencecache::v1alpha1;

namespace {
template <typename Message>
Message unframe(const std::string& body) {
  GrpcFrameDecoder decoder;
  REQUIRE(decoder.feed(body));
  std::string payload;
  REQUIRE(decoder.next(&payload));
  Message message;
  REQUIRE(message.ParseFromString(payload));
  return message;
}
}  // namespace

TEST_CASE("synthetic lookups: preloaded prompts, fixed schedule with the asked hit share") {
  SyntheticSpec spec;
  spec.blocks = 3;
  spec.replicas = 4;
  spec.hit_ratio = 0.75;
  spec.distinct = 10;
  const Scope scope{"t", "m", "s"};
  const auto w = synthetic_workload(spec, scope, Rpc::kLookup);
  CHECK(w.path == "/inferencecache.v1alpha1.InferenceCache/LookupRoute");
  CHECK(w.bodies.size() == 20);  // 10 stored + 10 never stored
  REQUIRE(w.preload.size() == 4);
  const auto update = unframe<v1::CacheStateUpdate>(*w.preload[1]);
  CHECK(update.replica_id() == "replica-1");
  CHECK(update.tenant_id() == "t");
  CHECK(update.hash_scheme() == "s");
  CHECK(update.prefixes_size() == 3);  // prompts 1, 5, 9
  CHECK(update.prefixes(0).block_hashes_size() == 3);
  CHECK(update.prefixes(0).block_token_counts(2) == 512);
  const auto lookup = unframe<v1::LookupRouteRequest>(*w.bodies[1]);
  CHECK(lookup.block_hashes(0) == update.prefixes(0).block_hashes(0));
  CHECK(w.order.size() == 65536);
  std::size_t hits = 0;
  for (auto i : w.order) hits += i < 10 ? 1 : 0;
  // Bernoulli(0.75) over 65536 draws: within 1% of the target (deterministic for the seed).
  CHECK(static_cast<double>(hits) / 65536.0 == doctest::Approx(0.75).epsilon(0.01));
  const auto again = synthetic_workload(spec, scope, Rpc::kLookup);
  CHECK(again.order == w.order);
  CHECK(*again.bodies[7] == *w.bodies[7]);
}

TEST_CASE("synthetic reports store one prompt per call, round-robin over replicas") {
  SyntheticSpec spec;
  spec.distinct = 5;
  spec.replicas = 2;
  const auto w = synthetic_workload(spec, Scope{"t", "m", "s"}, Rpc::kReport);
  CHECK(w.path == "/inferencecache.v1alpha1.InferenceCache/ReportCacheState");
  CHECK(w.preload.empty());
  REQUIRE(w.bodies.size() == 5);
  CHECK(unframe<v1::CacheStateUpdate>(*w.bodies[3]).replica_id() == "replica-1");
  CHECK(unframe<v1::CacheStateUpdate>(*w.bodies[4]).prefixes(0).token_count() == 8 * 512);
}

TEST_CASE("trace workload keeps the trace's chains") {
  std::vector<TraceRequest> trace{{0, 600, 1, {0, 7}}, {5, 100, 1, {0}}};
  const auto w = trace_workload(trace, Scope{"t", "m", "mooncake"}, Rpc::kLookup, 8, true);
  REQUIRE(w.bodies.size() == 2);
  CHECK(w.preload.size() == 2);
  const auto lookup = unframe<v1::LookupRouteRequest>(*w.bodies[0]);
  CHECK(lookup.block_hashes(1) == std::string("\0\0\0\0\0\0\0\x07", 8));
  CHECK(lookup.block_token_counts(1) == 88);
  CHECK(unframe<v1::CacheStateUpdate>(*w.preload[1]).replica_id() == "replica-1");
  const auto none = trace_workload(trace, Scope{"t", "m", "mooncake"}, Rpc::kLookup, 8, false);
  CHECK(none.preload.empty());
}

TEST_CASE("cli chains from Mooncake ids and from hex") {
  cli::Chain chain;
  std::string error;
  REQUIRE(cli::chain_from_ids({0, 14, 15}, 1100, &chain, &error));
  CHECK(chain.tokens == std::vector<std::int32_t>{512, 512, 76});
  CHECK(chain.hashes[2] == std::string("\0\0\0\0\0\0\0\x0f", 8));
  cli::Chain full;
  REQUIRE(cli::chain_from_ids({1, 2}, 0, &full, &error));
  CHECK(full.tokens == std::vector<std::int32_t>{512, 512});
  cli::Chain bad;
  CHECK_FALSE(cli::chain_from_ids({1, 2}, 1025, &bad, &error));
  CHECK(error == "--input-length 1025 does not fit 2 blocks of 512 tokens");
  CHECK_FALSE(cli::chain_from_ids({1, 2}, 512, &bad, &error));
  cli::Chain hex;
  REQUIRE(cli::chain_from_hex({"00ff", "AB"}, {16, 4}, &hex, &error));
  CHECK(hex.hashes == std::vector<std::string>{std::string("\x00\xff", 2), "\xab"});
  CHECK_FALSE(cli::chain_from_hex({"00"}, {1, 2}, &bad, &error));
  CHECK(error == "--block-hashes has 1 entries but --block-tokens 2");
  CHECK_FALSE(cli::chain_from_hex({"0g"}, {1}, &bad, &error));
  CHECK(error == "block hash #0 is not hex: 0g");
  CHECK_FALSE(cli::chain_from_hex({"00"}, {0}, &bad, &error));
  CHECK(error == "block token count #0 must be > 0");
}
