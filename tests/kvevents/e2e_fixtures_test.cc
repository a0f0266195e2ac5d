// Every kv-events fixture through real sockets: test publisher → inferencecache-kvevents → real
// server → grpc++ LookupRoute with the stored prompt's token_ids (docs/kvevents.md).
#include <doctest/doctest.h>

#include <span>

#include "e2e.hh"
#include "fingerprint/fingerprint.hh"
#include "fixtures.hh"
#include "kvevents/decode.hh"
#include "kvevents/replica_state.hh"

namespace ic::tools::kvevents::test {
namespace {

std::vector<std::uint32_t> qwen_twice() {
  auto t = kQwenBlock;
  t.insert(t.end(), kQwenBlock.begin(), kQwenBlock.end());
  return t;
}

// The fixture with only its BlockStored events, re-encoded in the fixture's own shape.
std::string stores_only(const std::string& name) {
  const std::string bytes = fixture(name);
  const auto r = decode_batch(bytes);
  REQUIRE(r.batch.has_value());
  Batch b = *r.batch;
  std::erase_if(b.events, [](const Event& e) { return !std::holds_alternative<BlockStored>(e); });
  // A map-shaped batch starts with fixmap (0x8X); array batches with fixarray (0x9X).
  const bool map = (static_cast<unsigned char>(bytes[0]) & 0xf0) == 0x80 ||
                   (static_cast<unsigned char>(bytes[11]) & 0xf0) == 0x80;
  return encode_batch(b, map ? Encoding::map : Encoding::array);
}

struct Case {
  const char* name;
  std::vector<std::uint32_t> tokens;  // the prompt the fixture stores
  std::string adapter;                // the partition it lands in
  int matched_stored;                 // matched tokens once its stores are applied
  int matched_after;                  // matched tokens once the whole fixture is applied (0: miss)
};

}  // namespace

TEST_CASE("every fixture with token_ids: stored prompt answers PREFIX_MATCH for replica r") {
  auto& server = shared_server();
  const std::vector<Case> cases = {
      {"vllm_array_v0.23_store_remove_clear", kQwenBlock, "", 16, 0},
      {"vllm_array_v0.22_full", kQwenBlock, "", 16, 0},
      {"vllm_array_v0.9_original", qwen_twice(), "", 32, 0},
      {"vllm_map_v0.26", kQwenBlock, "", 16, 0},
      {"vllm_array_bytes_hashes", kQwenBlock, "", 16, 16},
      {"vllm_map_lora", kQwenBlock, "adapter-116", 16, 16},
      {"sglang_array_signed_int64", qwen_twice(), "", 32, 32},
  };
  int t = 0;
  for (const Case& c : cases) {
    INFO(std::string(c.name));
    const std::string tenant_id = tenant(t++);
    auto pub = make_publisher(false);
    AdapterProcess adapter(adapter_flags(*pub, server.grpc_port(), tenant_id, false));
    REQUIRE(pub->wait_for_subscriber(std::chrono::seconds(30)));
    const Query q = by_tokens(tenant_id, c.tokens, c.adapter);
    const std::string want = "PREFIX_MATCH r:" + std::to_string(c.matched_stored);
    pub->publish(stores_only(c.name));
    CHECK(summary(wait_lookup(server.grpc_port(), q,
                              [&](const Answer& a) { return summary(a) == want; })) == want);
    if (!c.adapter.empty()) {
      // The base-model partition never sees an adapter's blocks.
      CHECK(lookup(server.grpc_port(), by_tokens(tenant_id, c.tokens)).reason != "PREFIX_MATCH");
    }
    // Now from a clean slate (the engine dropped its cache) the fixture itself, byte for byte;
    // without the clear its stores would be second copies of the blocks above.
    pub->publish(batch({AllBlocksCleared{}}));
    pub->publish(fixture(c.name));
    barrier(*pub, server.grpc_port(), tenant_id);
    const Answer after = lookup(server.grpc_port(), q);
    if (c.matched_after == 0) {
      CHECK(after.reason != "PREFIX_MATCH");
    } else {
      CHECK(summary(after) == "PREFIX_MATCH r:" + std::to_string(c.matched_after));
    }
    CHECK(adapter.metric("inferencecache_kvevents_malformed_events_total") == 0.0);
    CHECK(adapter.metric("inferencecache_kvevents_malformed_batches_total") == 0.0);
  }
}

TEST_CASE("salted SGLang fixtures: never an unsalted match, found under the salted chain") {
  // A server with SGLang's 2-token blocks, so the fixture's [1, 2] is one full block.
  itest::ServerOptions options;
  options.extra_args = server_flags();
  options.extra_args[3] = "2";  // --engine-block-size
  itest::ServerProcess server(options);
  int t = 10;
  for (const char* name : {"sglang_array_salted", "sglang_map"}) {
    INFO(std::string(name));
    const std::string tenant_id = tenant(t++);
    auto pub = make_publisher(false);
    auto flags = adapter_flags(*pub, server.grpc_port(), tenant_id, false);
    flags.insert(flags.end(), {"--engine-block-size", "2", "--hash-scheme", "sglang"});
    AdapterProcess adapter(flags);
    REQUIRE(pub->wait_for_subscriber(std::chrono::seconds(30)));
    pub->publish(fixture(name));
    // Control: the same tokens unsalted, on another replica's engine hash.
    BlockStored plain;
    plain.block_hashes = {777};
    plain.token_ids = {3, 4};
    plain.block_size = 2;
    pub->publish(batch({plain}));
    const Query unsalted_control = by_tokens(tenant_id, {3, 4}, "", "sglang");
    CHECK(summary(wait_lookup(server.grpc_port(), unsalted_control, [](const Answer& a) {
            return a.reason == "PREFIX_MATCH";
          })) == "PREFIX_MATCH r:2");
    const Query unsalted = by_tokens(tenant_id, {1, 2}, "", "sglang");
    CHECK(lookup(server.grpc_port(), unsalted).reason != "PREFIX_MATCH");
    // A gateway that knows the salt chains the first block onto salt_root(salt).
    const std::vector<std::uint32_t> tokens12 = {1, 2};
    const auto salted =
        fingerprint::prefix_hashes(std::span(tokens12), 2, salt_root("tenant-a"))[0];
    const auto wire = fingerprint::to_wire(salted);
    Query chain = by_tokens(tenant_id, {}, "", "sglang");
    chain.block_hashes = {std::string(wire.begin(), wire.end())};
    chain.block_tokens = {2};
    CHECK(summary(lookup(server.grpc_port(), chain)) == "PREFIX_MATCH r:2");
  }
}

TEST_CASE("an array batch and a map batch of the same events give an identical index") {
  auto& server = shared_server();
  const auto a = tokens(1, 2), b = tokens(2, 1), c = tokens(3, 1);
  std::vector<Event> events = {store({1, 2}, a), store({3}, b), store({4}, c, 2), removal({3})};
  auto lora = store({5}, tokens(4, 1));
  lora.lora_name = "sql";
  events.push_back(lora);
  std::vector<std::string> results[2];
  for (int i = 0; i < 2; ++i) {
    const std::string tenant_id = tenant(20 + i);
    auto pub = make_publisher(false);
    AdapterProcess adapter(adapter_flags(*pub, server.grpc_port(), tenant_id, false));
    REQUIRE(pub->wait_for_subscriber(std::chrono::seconds(30)));
    pub->publish(batch(events, i == 0 ? Encoding::array : Encoding::map));
    barrier(*pub, server.grpc_port(), tenant_id);
    auto chained = a;
    chained.insert(chained.end(), c.begin(), c.end());
    for (const Query& q :
         {by_tokens(tenant_id, a), by_tokens(tenant_id, b), by_tokens(tenant_id, chained),
          by_tokens(tenant_id, tokens(4, 1), "sql"), by_tokens(tenant_id, tokens(4, 1))}) {
      results[i].push_back(summary(lookup(server.grpc_port(), q)));
    }
  }
  CHECK(results[0] == std::vector<std::string>{"PREFIX_MATCH r:32", "NO_HINT", "PREFIX_MATCH r:48",
                                               "PREFIX_MATCH r:16", "NO_HINT"});
  CHECK(results[0] == results[1]);
}

}  // namespace ic::tools::kvevents::test
