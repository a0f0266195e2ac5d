// Every golden vector of tests/data/fingerprint_golden_vectors.json, byte for
// byte, plus the prefix hash of the Qwen tokenizer golden (docs/fingerprint.md).

#include "fingerprint/fingerprint.hh"

#include <doctest/doctest.h>
#include <openssl/evp.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

using ic::fingerprint::content_hashes;
using ic::fingerprint::prefix_hashes;
using ic::fingerprint::to_wire;
using json = nlohmann::json;

namespace {

json read_golden(const char* name) {
  const std::string path = std::string(IC_SHARED_DATA_DIR) + "/" + name;
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

std::string base64(const std::array<std::uint8_t, 8>& bytes) {
  unsigned char out[16] = {};
  const int n = EVP_EncodeBlock(out, bytes.data(), 8);
  return std::string(reinterpret_cast<char*>(out), static_cast<std::size_t>(n));
}

std::vector<std::uint32_t> tokens_of(const json& v) {
  std::vector<std::uint32_t> t;
  for (const auto& x : v["tokens"]) t.push_back(x.get<std::uint32_t>());
  return t;
}

// Checks one hash list against the golden's {dec, b64be} objects.
void check_hashes(const std::vector<std::uint64_t>& got, const json& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CHECK(std::to_string(got[i]) == want[i]["dec"].get<std::string>());
    CHECK(base64(to_wire(got[i])) == want[i]["b64be"].get<std::string>());
  }
}

}  // namespace

TEST_CASE("fingerprint golden vectors, every one, byte for byte") {
  const json doc = read_golden("fingerprint_golden_vectors.json");
  CHECK(doc["scheme"]["seed"].get<int>() == 1337);
  const auto& vectors = doc["vectors"];
  REQUIRE(vectors.size() == 6);
  for (const auto& v : vectors) {
    CAPTURE(v["name"].get<std::string>());
    const auto tokens = tokens_of(v);
    const auto bs = v["block_size"].get<std::int32_t>();
    std::optional<std::uint64_t> parent;
    if (!v["parent_prefix"].is_null())
      parent = std::stoull(v["parent_prefix"]["dec"].get<std::string>());
    check_hashes(content_hashes(tokens, bs), v["content_hashes"]);
    check_hashes(prefix_hashes(tokens, bs, parent), v["prefix_hashes"]);
    if (parent) CHECK(base64(to_wire(*parent)) == v["parent_prefix"]["b64be"].get<std::string>());
  }
}

TEST_CASE("qwen tokenizer golden: prefix hash of its tokens at its block size") {
  const json g = read_golden("qwen_hello_world_golden.json");
  const auto hashes = prefix_hashes(tokens_of(g), g["block_size"].get<std::int32_t>());
  REQUIRE(hashes.size() == 1);
  CHECK(base64(to_wire(hashes[0])) == g["prefix_hashes"][0]["b64be"].get<std::string>());
  CHECK(base64(to_wire(hashes[0])) == "I48zwHwdhp4=");
}

TEST_CASE("block size ≤ 0 or no full block gives an empty chain") {
  const std::vector<std::uint32_t> t{1, 2, 3, 4};
  CHECK(prefix_hashes(t, 0).empty());
  CHECK(prefix_hashes(t, -16).empty());
  CHECK(prefix_hashes(t, 5).empty());
  CHECK(content_hashes(t, 0).empty());
  CHECK(prefix_hashes(t, 4).size() == 1);
}

TEST_CASE("wire form is big-endian and round-trips") {
  const auto w = to_wire(0x0102030405060708ull);
  CHECK(w == std::array<std::uint8_t, 8>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(ic::fingerprint::from_wire(w) == 0x0102030405060708ull);
}
