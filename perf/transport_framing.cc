// Transport microbenchmarks, part 1: gRPC length-prefixed framing and the
// protobuf codec of the hot path (what one LookupRoute costs before and after
// the index). Request shape = perf/compare.sh's hot request: 8 blocks of 16
// opaque hash bytes; response = 2 scored replicas.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <span>
#include <string>

#include "hot_request.hh"
#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "rpc/framing.hh"

namespace {

namespace pb = ::inferencecache::v1alpha1;

pb::LookupRouteResponse hot_response() {
  pb::LookupRouteResponse r;
  for (int i = 0; i < 2; ++i) {
    pb::ReplicaScore* s = r.add_replica_scores();
    s->set_replica_id("replica-" + std::to_string(i));
    s->set_score(86.4f);
    s->set_matched_tokens(128);
    s->set_estimated_cache_hit_prob(1.0f);
    s->set_tier(pb::CACHE_TIER_T1);
  }
  r.set_reason_code("PREFIX_MATCH");
  r.set_lookup_latency_us(3);
  return r;
}

std::string framed(const google::protobuf::MessageLite& m) {
  std::string out;
  const std::string payload = m.SerializeAsString();
  ic::rpc::append_frame_header(out, static_cast<std::uint32_t>(payload.size()));
  return out + payload;
}

// A whole message inside one DATA payload: the zero-copy fast path.
void BM_FrameReaderWhole(benchmark::State& state) {
  const std::string wire = framed(ic::perf::hot_lookup_request());
  const auto bytes = std::as_bytes(std::span(wire.data(), wire.size()));
  ic::rpc::MessageReader reader(4 << 20);
  std::size_t seen = 0;
  for (auto _ : state) {
    reader.feed(bytes, [&](std::span<const std::byte> m) { seen += m.size(); });
    benchmark::DoNotOptimize(seen);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * wire.size()));
}
BENCHMARK(BM_FrameReaderWhole);

// The same message cut in 3 pieces (inside the prefix and inside the body):
// the gathering path a slow or fragmenting client takes.
void BM_FrameReaderSplit(benchmark::State& state) {
  const std::string wire = framed(ic::perf::hot_lookup_request());
  const auto bytes = std::as_bytes(std::span(wire.data(), wire.size()));
  const std::size_t cut1 = 3;
  const std::size_t cut2 = wire.size() / 2;
  ic::rpc::MessageReader reader(4 << 20);
  std::size_t seen = 0;
  auto sink = [&](std::span<const std::byte> m) { seen += m.size(); };
  for (auto _ : state) {
    reader.feed(bytes.subspan(0, cut1), sink);
    reader.feed(bytes.subspan(cut1, cut2 - cut1), sink);
    reader.feed(bytes.subspan(cut2), sink);
    benchmark::DoNotOptimize(seen);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * wire.size()));
}
BENCHMARK(BM_FrameReaderSplit);

// Protobuf decode of the hot request (into a reused message, as a server would).
void BM_DecodeLookupRouteRequest(benchmark::State& state) {
  const std::string payload = ic::perf::hot_lookup_request().SerializeAsString();
  pb::LookupRouteRequest r;
  for (auto _ : state) {
    benchmark::DoNotOptimize(r.ParseFromArray(payload.data(), static_cast<int>(payload.size())));
  }
}
BENCHMARK(BM_DecodeLookupRouteRequest);

// Protobuf encode of the response plus its 5-byte length prefix.
void BM_EncodeFramedLookupRouteResponse(benchmark::State& state) {
  const pb::LookupRouteResponse response = hot_response();
  std::string out;
  for (auto _ : state) {
    out.clear();
    ic::rpc::append_frame_header(out, static_cast<std::uint32_t>(response.ByteSizeLong()));
    response.AppendToString(&out);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_EncodeFramedLookupRouteResponse);

}  // namespace

BENCHMARK_MAIN();
