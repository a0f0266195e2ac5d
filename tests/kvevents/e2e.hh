// End-to-end helpers: a shared real server (policy: no matched-token floor, no routing floor, no
// affinity, so a lookup answers PREFIX_MATCH or a plain miss), grpc++ LookupRoute by token ids,
// event builders and the vLLM-like publisher.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "adapter_process.hh"
#include "block_events.hh"
#include "kvevents/encode.hh"
#include "kvevents/event.hh"
#include "kvevents/test_publisher.hh"
#include "support/server_process.hh"

namespace ic::tools::kvevents::test {

// Tenants k0 … k63 have the permissive policy.
std::string tenant(int i);

// Flags of the shared test server (block size 16, one thread, the policy file).
std::vector<std::string> server_flags();
// The server every test shares (started on first use).
itest::ServerProcess& shared_server();

struct Answer {
  std::string reason;
  std::vector<std::pair<std::string, int>> scores;  // (replica_id, matched_tokens), ranked
};

struct Query {
  std::string tenant;
  std::vector<std::uint32_t> token_ids;
  std::string adapter;
  std::string model = "m";
  std::string scheme = "vllm";
  std::vector<std::string> block_hashes;  // a wire chain instead of token_ids
  std::vector<std::int32_t> block_tokens;
};

// A token_ids lookup (scheme vllm unless given).
Query by_tokens(std::string tenant, std::vector<std::uint32_t> token_ids, std::string adapter = "",
                std::string scheme = "vllm");

Answer lookup(std::uint16_t grpc_port, const Query& q);
// Polls lookup() until `want` holds (30 s); returns the last answer.
template <class Pred>
Answer wait_lookup(std::uint16_t grpc_port, const Query& q, Pred want,
                   std::chrono::milliseconds timeout = std::chrono::seconds(30));
// "PREFIX_MATCH r:16" style summary for assertions.
std::string summary(const Answer& a);

// 16 × blocks distinct token ids derived from `seed`.
std::vector<std::uint32_t> tokens(std::uint32_t seed, int blocks = 1);

BlockRemoved removal(std::vector<std::uint64_t> hashes);
std::string batch(std::vector<Event> events, Encoding encoding = Encoding::array,
                  std::optional<std::int64_t> dp_rank = 0);

// A publisher bound on loopback (with a replay socket when `replay`).
std::unique_ptr<TestPublisher> make_publisher(bool replay, std::size_t buffer_steps = 10000);
// The adapter flags for this publisher/server/tenant (no stats, 5 ms window).
std::vector<std::string> adapter_flags(const TestPublisher& pub, std::uint16_t grpc_port,
                                       const std::string& tenant, bool replay);

// Publishes a marker store and waits until the server answers it: everything published before
// it has been applied by the adapter and ingested by the server (one ordered connection).
void barrier(TestPublisher& pub, std::uint16_t grpc_port, const std::string& tenant,
             const std::string& replica = "r");

template <class Pred>
Answer wait_lookup(std::uint16_t grpc_port, const Query& q, Pred want,
                   std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Answer a = lookup(grpc_port, q);
  while (!want(a) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    a = lookup(grpc_port, q);
  }
  return a;
}

}  // namespace ic::tools::kvevents::test
