// Every fixture of tests/data/kv-events decodes to exactly the events it carries
// (docs/kvevents.md "What it accepts on the wire"), and malformed input is skipped and counted,
// never fatal.
#include "kvevents/decode.hh"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "fixtures.hh"
#include "kvevents/encode.hh"

namespace ic::tools::kvevents {
namespace {

using test::fixture;
using test::kQwenBlock;
using namespace std::string_literals;

constexpr std::uint64_t kVllmHash = 15760518052499183552ull;  // ≥ 2^63
constexpr double kTs = 1789095808.8378847;

Batch decoded(const std::string& name) {
  DecodeResult r = decode_batch(fixture(name));
  INFO(name << ": " << r.error);
  REQUIRE(r.batch.has_value());
  CHECK(r.batch->malformed_events == 0);
  CHECK(r.batch->unknown_events == 0);
  return *r.batch;
}

std::vector<std::uint32_t> twice(const std::vector<std::uint32_t>& v) {
  auto out = v;
  out.insert(out.end(), v.begin(), v.end());
  return out;
}

void check_qwen_store(const Event& e, std::uint64_t hash) {
  const auto* s = std::get_if<BlockStored>(&e);
  REQUIRE(s != nullptr);
  CHECK(s->block_hashes == std::vector<std::uint64_t>{hash});
  CHECK_FALSE(s->parent_block_hash.has_value());
  CHECK(s->token_ids == kQwenBlock);
  CHECK(s->block_size == 16);
  CHECK_FALSE(s->lora_id.has_value());
  CHECK(s->medium == std::optional<std::string>("GPU"));
  CHECK_FALSE(s->lora_name.has_value());
  CHECK_FALSE(s->cache_salt.has_value());
  CHECK(s->group_idx == 0);
}

void check_remove(const Event& e, std::uint64_t hash, std::optional<std::string> medium) {
  const auto* r = std::get_if<BlockRemoved>(&e);
  REQUIRE(r != nullptr);
  CHECK(r->block_hashes == std::vector<std::uint64_t>{hash});
  CHECK(r->medium == medium);
  CHECK(r->group_idx == 0);
}

}  // namespace

TEST_CASE("fixture files are the bytes fixtures_index.json lists") {
  const auto index = nlohmann::json::parse(test::read_data("kv-events/fixtures_index.json"));
  int checked = 0;
  for (const auto& [name, entry] : index["fixtures"].items()) {
    const std::string bytes = fixture(name);
    std::string hex;
    for (unsigned char c : bytes) {
      static const char* digits = "0123456789abcdef";
      hex += digits[c >> 4];
      hex += digits[c & 15];
    }
    CHECK_MESSAGE(hex == entry["hex"].get<std::string>(), name);
    CHECK(bytes.size() == entry["len"].get<std::size_t>());
    ++checked;
  }
  CHECK(checked == 9);
}

TEST_CASE("vLLM v0.23 array batch and v0.26 map batch: the same store, remove, clear") {
  for (const char* fixture : {"vllm_array_v0.23_store_remove_clear", "vllm_map_v0.26"}) {
    CAPTURE(fixture);
    const Batch b = decoded(fixture);
    CHECK(b.ts == kTs);
    CHECK(b.dp_rank == std::optional<std::int64_t>(0));
    REQUIRE(b.events.size() == 3);
    check_qwen_store(b.events[0], kVllmHash);
    check_remove(b.events[1], kVllmHash, "GPU");
    CHECK(std::holds_alternative<AllBlocksCleared>(b.events[2]));
  }
}

TEST_CASE("vLLM v0.22 array batch with extra_keys, group_idx and kv_cache_spec_kind") {
  const Batch b = decoded("vllm_array_v0.22_full");
  CHECK(b.dp_rank == std::optional<std::int64_t>(0));
  REQUIRE(b.events.size() == 2);
  check_qwen_store(b.events[0], kVllmHash);
  check_remove(b.events[1], kVllmHash, "GPU");
}

TEST_CASE("vLLM v0.9 original: two-element batch, no medium, two blocks") {
  const Batch b = decoded("vllm_array_v0.9_original");
  CHECK(b.ts == kTs);
  CHECK_FALSE(b.dp_rank.has_value());
  REQUIRE(b.events.size() == 2);
  const auto* s = std::get_if<BlockStored>(&b.events[0]);
  REQUIRE(s != nullptr);
  CHECK(s->block_hashes == std::vector<std::uint64_t>{123, 456});
  CHECK(s->token_ids == twice(kQwenBlock));
  CHECK(s->block_size == 16);
  CHECK_FALSE(s->medium.has_value());
  CHECK_FALSE(s->lora_id.has_value());
  check_remove(b.events[1], 123, std::nullopt);
}

TEST_CASE("bin block hash: the last 8 bytes big-endian") {
  const Batch b = decoded("vllm_array_bytes_hashes");
  REQUIRE(b.events.size() == 1);
  check_qwen_store(b.events[0], 0xABABABABABABABABull);
  CHECK(normalise_hash_bytes(std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09", 9)) ==
        0x0203040506070809ull);
  CHECK(normalise_hash_bytes(std::string("\x01\x02", 2)) == 0x0102ull);
  CHECK_FALSE(normalise_hash_bytes("").has_value());
}

TEST_CASE("vLLM map event with a LoRA: lora_id 117 named adapter-116") {
  const Batch b = decoded("vllm_map_lora");
  REQUIRE(b.events.size() == 1);
  const auto* s = std::get_if<BlockStored>(&b.events[0]);
  REQUIRE(s != nullptr);
  CHECK(s->block_hashes == std::vector<std::uint64_t>{42});
  CHECK(s->lora_id == std::optional<std::int64_t>(117));
  CHECK(s->lora_name == std::optional<std::string>("adapter-116"));
  CHECK(s->token_ids == kQwenBlock);
  CHECK(s->group_idx == 0);
}

TEST_CASE("SGLang array batch: negative int64 hashes, parent chain, CPU_PINNED removal, rank 1") {
  const Batch b = decoded("sglang_array_signed_int64");
  CHECK(b.dp_rank == std::optional<std::int64_t>(1));
  REQUIRE(b.events.size() == 3);
  constexpr std::uint64_t kFirst = 0x9E3779B97F4A7C15ull;  // int64 -7046029254386353131
  check_qwen_store(b.events[0], kFirst);
  const auto* second = std::get_if<BlockStored>(&b.events[1]);
  REQUIRE(second != nullptr);
  CHECK(second->block_hashes == std::vector<std::uint64_t>{1234567890123456789ull});
  CHECK(second->parent_block_hash == std::optional<std::uint64_t>(kFirst));
  CHECK(second->token_ids == kQwenBlock);
  check_remove(b.events[2], kFirst, "CPU_PINNED");
}

TEST_CASE("SGLang salted block, array and map form, nil attn_dp_rank") {
  for (const char* name : {"sglang_array_salted", "sglang_map"}) {
    const Batch b = decoded(name);
    CHECK(b.ts == 1.0);
    CHECK_FALSE(b.dp_rank.has_value());
    REQUIRE(b.events.size() == 1);
    const auto* s = std::get_if<BlockStored>(&b.events[0]);
    REQUIRE(s != nullptr);
    CHECK(s->block_hashes == std::vector<std::uint64_t>{123});
    CHECK(s->token_ids == std::vector<std::uint32_t>{1, 2});
    CHECK(s->block_size == 2);
    CHECK(s->medium == std::optional<std::string>("GPU"));
    CHECK(s->cache_salt == std::optional<std::string>("tenant-a"));
    CHECK_FALSE(s->lora_name.has_value());
  }
}

TEST_CASE("malformed batches are errors, never crashes") {
  CHECK_FALSE(decode_batch("").batch.has_value());
  CHECK_FALSE(decode_batch("\xc1").batch.has_value());          // reserved byte
  CHECK_FALSE(decode_batch("\x92\xcb\x00").batch.has_value());  // truncated
  CHECK_FALSE(decode_batch("\x91\x01").batch.has_value());      // [1]
  CHECK_FALSE(decode_batch("\x92\x01\x02").batch.has_value());  // events not a list
  CHECK_FALSE(decode_batch("\x2a").batch.has_value());          // 42
  CHECK_FALSE(decode_batch(std::string("\x92\x01\x90\x00", 4)).batch.has_value());  // trailing
  const auto ok = decode_batch(std::string("\x92\x01\x90", 3));                     // [1, []]
  REQUIRE(ok.batch.has_value());
  CHECK(ok.batch->events.empty());
}

TEST_CASE("decode_batch_chunks: at most N events per chunk, in order, in both shapes") {
  for (const Encoding enc : {Encoding::array, Encoding::map}) {
    Batch batch;
    batch.ts = 12.5;
    batch.dp_rank = 3;
    for (std::uint64_t i = 1; i <= 10; ++i) {
      BlockRemoved r;
      r.block_hashes = {i};
      batch.events.emplace_back(std::move(r));
    }
    std::vector<std::size_t> sizes;
    std::vector<std::uint64_t> hashes;
    const std::string error =
        decode_batch_chunks(encode_batch(batch, enc), 4, [&](const Batch& chunk) {
          CHECK(chunk.ts == 12.5);
          CHECK(chunk.dp_rank == std::optional<std::int64_t>(3));
          sizes.push_back(chunk.events.size());
          for (const Event& e : chunk.events) {
            hashes.push_back(std::get<BlockRemoved>(e).block_hashes.at(0));
          }
        });
    CHECK(error.empty());
    CHECK(sizes == std::vector<std::size_t>{4, 4, 2});
    CHECK(hashes == std::vector<std::uint64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  }
}

TEST_CASE("decode_batch_chunks: a batch malformed after its first chunk applies nothing") {
  Batch batch;
  for (std::uint64_t i = 1; i <= 10; ++i) {
    BlockRemoved r;
    r.block_hashes = {i};
    batch.events.emplace_back(std::move(r));
  }
  const std::string payload = encode_batch(batch, Encoding::array);
  int calls = 0;
  const auto count = [&](const Batch&) { ++calls; };
  CHECK(decode_batch_chunks(payload + "\x90", 2, count) == "trailing bytes after the batch");
  CHECK(decode_batch_chunks(payload.substr(0, payload.size() - 1), 2, count) ==
        "undecodable msgpack");
  // An event nested past the depth limit (16) at the end: refused whole, as msgpack's unpack did.
  std::string deep = "\x92\x01\x92\x91\x00"s;  // [1, [[0], <deep>]]
  deep += std::string(20, '\x91') + "\x00";
  CHECK(decode_batch_chunks(deep, 1, count) == "undecodable msgpack");
  CHECK(calls == 0);
}

TEST_CASE("a malformed or unknown event is skipped, the rest of the batch kept") {
  // [1.0, [["BlockStored", "x"], ["Bogus"], 7, ["AllBlocksCleared"], ["BlockRemoved", [1]]]]
  const std::string payload =
      "\x92\xcb\x3f\xf0\x00\x00\x00\x00\x00\x00\x95"
      "\x92\xab"
      "BlockStored"
      "\xa1x"
      "\x91\xa5"
      "Bogus"
      "\x07"
      "\x91\xb0"
      "AllBlocksCleared"
      "\x92\xac"
      "BlockRemoved"
      "\x91\x01"s;
  const auto r = decode_batch(payload);
  REQUIRE(r.batch.has_value());
  CHECK(r.batch->malformed_events == 2);
  CHECK(r.batch->unknown_events == 1);
  REQUIRE(r.batch->events.size() == 2);
  CHECK(std::holds_alternative<AllBlocksCleared>(r.batch->events[0]));
  check_remove(r.batch->events[1], 1, std::nullopt);
}

}  // namespace ic::tools::kvevents
