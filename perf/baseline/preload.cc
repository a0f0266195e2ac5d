// ic-perf-preload: puts the same deterministic index state into any
// InferenceCache server (inferencecache-server or ic-baseline-server) over
// ReportCacheState, writes the gRPC-framed request bodies h2load replays, and
// verifies that the server answers them as expected, so both servers are
// measured on identical state and identical answers.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <CLI/CLI.hpp>

#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"

namespace pb = ::inferencecache::v1alpha1;

namespace {

// The shape of the preloaded state. Tenant t, prefix p is a chain of `blocks`
// KV blocks of `block_tokens` tokens; the first `shared_blocks` blocks are
// shared by groups of 4 prefixes (a common system prompt), so a chain walk
// starts with several replicas and narrows. Prefix p is held by replicas
// p % replicas and (p + 1) % replicas.
struct Shape {
  unsigned tenants = 8;
  unsigned replicas = 8;
  unsigned prefixes = 1024;  // per tenant
  unsigned blocks = 8;
  unsigned shared_blocks = 2;
  int block_tokens = 16;
  unsigned prefixes_per_message = 256;
  std::string model = "perf-model";
  std::string scheme = "perf-xxh3-64";
};

// splitmix64: a cheap, well-mixed deterministic generator for hash bytes.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// 16 opaque hash bytes of block `block` of prefix `prefix` of tenant `tenant`.
std::string block_hash(const Shape& shape, unsigned tenant, unsigned prefix, unsigned block) {
  const unsigned owner = block < shape.shared_blocks ? prefix / 4 : prefix;
  std::uint64_t a = mix((std::uint64_t{tenant} << 48) ^ (std::uint64_t{owner} << 16) ^ block);
  std::uint64_t b = mix(a);
  std::string out(16, '\0');
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<char>(a >> (56 - 8 * i));
    out[8 + i] = static_cast<char>(b >> (56 - 8 * i));
  }
  return out;
}

std::string tenant_name(unsigned tenant) { return "tenant-" + std::to_string(tenant); }
std::string replica_name(unsigned replica) { return "replica-" + std::to_string(replica); }

bool holds(const Shape& shape, unsigned replica, unsigned prefix) {
  return prefix % shape.replicas == replica || (prefix + 1) % shape.replicas == replica;
}

void add_prefix(const Shape& shape, unsigned tenant, unsigned prefix, pb::CacheStateUpdate& u) {
  pb::PrefixEntry* entry = u.add_prefixes();
  for (unsigned j = 0; j < shape.blocks; ++j) {
    entry->add_block_hashes(block_hash(shape, tenant, prefix, j));
    entry->add_block_token_counts(shape.block_tokens);
  }
  entry->set_token_count(shape.block_tokens * static_cast<int>(shape.blocks));
  entry->set_tier(pb::CACHE_TIER_T1);
}

pb::CacheStateUpdate new_update(const Shape& shape, unsigned tenant, unsigned replica) {
  pb::CacheStateUpdate u;
  u.set_replica_id(replica_name(replica));
  u.set_model_id(shape.model);
  u.set_tenant_id(tenant_name(tenant));
  u.set_hash_scheme(shape.scheme);
  u.set_timestamp_us(0);  // "now" on the server's clock
  pb::ReplicaStats* stats = u.mutable_stats();
  stats->set_replica_id(replica_name(replica));
  stats->set_hit_rate(0.5f);
  stats->set_pressure(0.1f);
  return u;
}

// A Write failed: the stream is broken; Finish says why. Returns -1.
long finish_failed(grpc::ClientWriter<pb::CacheStateUpdate>& writer, const pb::Ack& ack) {
  const grpc::Status status = writer.Finish();
  std::fprintf(stderr, "ReportCacheState: write failed: %d %s (accepted=%d)\n", status.error_code(),
               status.error_message().c_str(), ack.accepted());
  return -1;
}

// Streams every (tenant, replica)'s prefixes in messages of at most
// prefixes_per_message entries. Returns the number of messages or -1.
long ingest(pb::InferenceCache::Stub& stub, const Shape& shape) {
  grpc::ClientContext context;
  pb::Ack ack;
  std::unique_ptr<grpc::ClientWriter<pb::CacheStateUpdate>> writer =
      stub.ReportCacheState(&context, &ack);
  long messages = 0;
  for (unsigned t = 0; t < shape.tenants; ++t) {
    for (unsigned r = 0; r < shape.replicas; ++r) {
      pb::CacheStateUpdate u = new_update(shape, t, r);
      for (unsigned p = 0; p < shape.prefixes; ++p) {
        if (!holds(shape, r, p)) continue;
        add_prefix(shape, t, p, u);
        if (static_cast<unsigned>(u.prefixes_size()) == shape.prefixes_per_message) {
          if (!writer->Write(u)) return finish_failed(*writer, ack);
          ++messages;
          u = new_update(shape, t, r);
        }
      }
      if (u.prefixes_size() > 0) {
        if (!writer->Write(u)) return finish_failed(*writer, ack);
        ++messages;
      }
    }
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();  // also reports why a Write failed
  if (!status.ok() || !ack.accepted()) {
    std::fprintf(stderr, "ReportCacheState: %d %s (accepted=%d)\n", status.error_code(),
                 status.error_message().c_str(), ack.accepted());
    return -1;
  }
  return messages;
}

// The hot-path request h2load replays: tenant 0's prefix 0 as a full chain.
pb::LookupRouteRequest lookup_request(const Shape& shape) {
  pb::LookupRouteRequest req;
  req.set_model_id(shape.model);
  req.set_tenant_id(tenant_name(0));
  req.set_hash_scheme(shape.scheme);
  for (unsigned j = 0; j < shape.blocks; ++j) {
    req.add_block_hashes(block_hash(shape, 0, 0, j));
    req.add_block_token_counts(shape.block_tokens);
  }
  return req;
}

pb::RenderTemplateRequest render_request() {
  pb::RenderTemplateRequest req;
  req.set_template_ref("perf-template");
  req.set_tenant_id(tenant_name(0));
  return req;
}

// Writes the gRPC length-prefixed message (flag 0, 4-byte big-endian length).
bool write_framed(const std::string& path, const google::protobuf::Message& message) {
  const std::string payload = message.SerializeAsString();
  std::string framed(5, '\0');
  const auto n = static_cast<std::uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) framed[1 + i] = static_cast<char>(n >> (24 - 8 * i));
  framed += payload;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(framed.data(), static_cast<std::streamsize>(framed.size()));
  return static_cast<bool>(out);
}

// Calls LookupRoute and RenderTemplate once; both servers must give the
// same answer or the comparison is meaningless.
bool verify(pb::InferenceCache::Stub& stub, const Shape& shape) {
  grpc::ClientContext lookup_context;
  pb::LookupRouteResponse lookup;
  grpc::Status status = stub.LookupRoute(&lookup_context, lookup_request(shape), &lookup);
  if (!status.ok()) {
    std::fprintf(stderr, "LookupRoute: %d %s\n", status.error_code(),
                 status.error_message().c_str());
    return false;
  }
  std::printf("verify LookupRoute: reason_code=%s replicas=", lookup.reason_code().c_str());
  for (const pb::ReplicaScore& s : lookup.replica_scores()) {
    std::printf("%s(matched=%d score=%.3f) ", s.replica_id().c_str(), s.matched_tokens(),
                static_cast<double>(s.score()));
  }
  std::printf("\n");
  grpc::ClientContext render_context;
  pb::RenderTemplateResponse render;
  status = stub.RenderTemplate(&render_context, render_request(), &render);
  std::printf("verify RenderTemplate: status=%d reason_code=%s\n", status.error_code(),
              render.reason_code().c_str());
  // Prefix 0 is held by replica-0 and replica-1 over its whole chain; the
  // replicas sharing only its first blocks fall under the 64-token floor.
  // Their order depends on microseconds of freshness (replica-1 is ingested
  // later), so it is not checked.
  const int full = shape.block_tokens * static_cast<int>(shape.blocks);
  bool lookup_ok = lookup.reason_code() == "PREFIX_MATCH" && lookup.replica_scores_size() == 2;
  if (lookup_ok) {
    const pb::ReplicaScore& a = lookup.replica_scores(0);
    const pb::ReplicaScore& b = lookup.replica_scores(1);
    const bool names = (a.replica_id() == replica_name(0) && b.replica_id() == replica_name(1)) ||
                       (a.replica_id() == replica_name(1) && b.replica_id() == replica_name(0));
    lookup_ok = names && a.matched_tokens() == full && b.matched_tokens() == full;
  }
  return lookup_ok && status.ok() && render.reason_code() == "TEMPLATE_NOT_FOUND";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Preload identical index state into an InferenceCache server, emit h2load bodies"};
  Shape shape;
  std::string target = "127.0.0.1:9090";
  std::string emit_lookup;
  std::string emit_render;
  int wait_ms = 5000;
  bool skip_ingest = false;
  bool do_verify = false;
  app.add_option("--target", target, "host:port of the server");
  app.add_option("--wait-ms", wait_ms, "wait this long for the server to accept connections");
  app.add_option("--tenants", shape.tenants, "tenants");
  app.add_option("--replicas", shape.replicas, "replicas per tenant");
  app.add_option("--prefixes", shape.prefixes, "prefixes per tenant");
  app.add_option("--blocks", shape.blocks, "KV blocks per prefix chain");
  app.add_option("--emit-lookup", emit_lookup, "write the framed LookupRouteRequest here");
  app.add_option("--emit-render", emit_render, "write the framed RenderTemplateRequest here");
  app.add_flag("--skip-ingest", skip_ingest, "only emit / verify");
  app.add_flag(
      "--verify", do_verify,
      "check LookupRoute = PREFIX_MATCH on replica-0 and replica-1 (full chain each) "
      "and RenderTemplate = TEMPLATE_NOT_FOUND (no server holds the preload's template); exit 2 "
      "otherwise");
  CLI11_PARSE(app, argc, argv);

  if (!emit_lookup.empty() && !write_framed(emit_lookup, lookup_request(shape))) return 1;
  if (!emit_render.empty() && !write_framed(emit_render, render_request())) return 1;
  if (skip_ingest && !do_verify) return 0;

  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                 std::chrono::milliseconds(wait_ms))) {
    std::fprintf(stderr, "ic-perf-preload: %s not reachable within %d ms\n", target.c_str(),
                 wait_ms);
    return 1;
  }
  std::unique_ptr<pb::InferenceCache::Stub> stub = pb::InferenceCache::NewStub(channel);
  if (!skip_ingest) {
    const auto start = std::chrono::steady_clock::now();
    const long messages = ingest(*stub, shape);
    if (messages < 0) return 1;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    std::printf(
        "preloaded %ld CacheStateUpdates (%u tenants x %u prefixes x %u blocks) in %lld ms\n",
        messages, shape.tenants, shape.prefixes, shape.blocks, static_cast<long long>(ms));
  }
  if (do_verify && !verify(*stub, shape)) return 2;
  return 0;
}
