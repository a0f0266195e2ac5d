#include "e2e.hh"

#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "support/grpc_channel.hh"
#include "support/text.hh"

namespace ic::tools::kvevents::test {

namespace v1 = inferencecache::v1alpha1;

std::string tenant(int i) { return itest::numbered("k", i); }

std::vector<std::string> server_flags() {
  static const std::string policy = [] {
    std::string json = "{\"version\":7,\"policies\":[";
    for (int i = 0; i < 64; ++i) {
      if (i > 0) json += ",";
      json += "{\"namespace\":\"" + tenant(i) +
              "\",\"minimumMatchedTokens\":0,\"routingFloorScore\":0,\"affinityRouting\":false}";
    }
    json += "]}";
    const auto path =
        std::filesystem::temp_directory_path() / itest::numbered("ic-kvevents-policy-", ::getpid());
    std::ofstream(path) << json;
    return path.string();
  }();
  return {"--threads",     "1",    "--engine-block-size", "16",
          "--policy-file", policy, "--log-level",         "warn"};
}

itest::ServerProcess& shared_server() {
  static itest::ServerProcess server([] {
    itest::ServerOptions options;
    options.extra_args = server_flags();
    return options;
  }());
  return server;
}

Query by_tokens(std::string tenant_id, std::vector<std::uint32_t> token_ids, std::string adapter,
                std::string scheme) {
  Query q;
  q.tenant = std::move(tenant_id);
  q.token_ids = std::move(token_ids);
  q.adapter = std::move(adapter);
  q.scheme = std::move(scheme);
  return q;
}

Answer lookup(std::uint16_t grpc_port, const Query& q) {
  static std::map<std::uint16_t, std::unique_ptr<v1::InferenceCache::Stub>> stubs;
  auto& stub = stubs[grpc_port];
  if (!stub) stub = v1::InferenceCache::NewStub(itest::insecure_channel(grpc_port));
  v1::LookupRouteRequest request;
  request.set_tenant_id(q.tenant);
  request.set_model_id(q.model);
  request.set_hash_scheme(q.scheme);
  request.set_adapter_id(q.adapter);
  for (auto t : q.token_ids) request.add_token_ids(t);
  for (const auto& h : q.block_hashes) request.add_block_hashes(h);
  for (auto n : q.block_tokens) request.add_block_token_counts(n);
  grpc::ClientContext context;
  context.set_deadline(itest::deadline_in(std::chrono::seconds(10)));
  v1::LookupRouteResponse response;
  const grpc::Status status = stub->LookupRoute(&context, request, &response);
  Answer a;
  if (!status.ok()) {
    a.reason = "grpc error " + status.error_message();
    return a;
  }
  a.reason = response.reason_code();
  for (const auto& s : response.replica_scores())
    a.scores.emplace_back(s.replica_id(), s.matched_tokens());
  return a;
}

std::string summary(const Answer& a) {
  std::string s = a.reason;
  for (const auto& [replica, matched] : a.scores) {
    s += " ";
    s += replica;
    s += ":";
    s += std::to_string(matched);
  }
  return s;
}

std::vector<std::uint32_t> tokens(std::uint32_t seed, int blocks) {
  std::vector<std::uint32_t> out;
  for (int i = 0; i < 16 * blocks; ++i) out.push_back(seed * 1000 + static_cast<std::uint32_t>(i));
  return out;
}

BlockRemoved removal(std::vector<std::uint64_t> hashes) {
  BlockRemoved r;
  r.block_hashes = std::move(hashes);
  r.medium = "GPU";
  return r;
}

std::string batch(std::vector<Event> events, Encoding encoding,
                  std::optional<std::int64_t> dp_rank) {
  Batch b;
  b.ts = 1.0;
  b.dp_rank = dp_rank;
  b.events = std::move(events);
  return encode_batch(b, encoding);
}

std::unique_ptr<TestPublisher> make_publisher(bool replay, std::size_t buffer_steps) {
  PublisherOptions o;
  o.endpoint = "tcp://127.0.0.1:*";
  if (replay) o.replay_endpoint = "tcp://127.0.0.1:*";
  o.buffer_steps = buffer_steps;
  return std::make_unique<TestPublisher>(o);
}

std::vector<std::string> adapter_flags(const TestPublisher& pub, std::uint16_t grpc_port,
                                       const std::string& tenant_id, bool replay) {
  std::vector<std::string> f = {"--engine-endpoint",
                                pub.endpoint(),
                                "--server",
                                itest::loopback(grpc_port),
                                "--replica-id",
                                "r",
                                "--model-id",
                                "m",
                                "--tenant-id",
                                tenant_id,
                                "--engine-metrics-url",
                                "",
                                "--window",
                                "5ms"};
  if (replay) {
    f.push_back("--replay-endpoint");
    f.push_back(pub.replay_endpoint());
  }
  return f;
}

void barrier(TestPublisher& pub, std::uint16_t grpc_port, const std::string& tenant_id,
             const std::string& replica) {
  static std::uint64_t marker = 0x7000000000000000ull;
  ++marker;
  const auto t = tokens(static_cast<std::uint32_t>(marker & 0xffff) + 900000, 1);
  pub.publish(batch({store({marker}, t)}));
  const Answer a = wait_lookup(grpc_port, by_tokens(tenant_id, t), [&](const Answer& x) {
    for (const auto& [r, m] : x.scores) {
      if (r == replica && m == 16) return true;
    }
    return false;
  });
  if (a.reason != "PREFIX_MATCH") throw std::runtime_error("barrier not reached: " + summary(a));
}

}  // namespace ic::tools::kvevents::test
