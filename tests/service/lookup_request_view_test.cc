// LookupRouteRequest decoded as views (sharding/lookup_request_view.hh): the
// plain encoding is taken with protobuf's values, everything else is left to
// protobuf, and whatever the views take protobuf parses to the same query
// (checked on hand-written edge cases and on random and mutated wire bytes).

#include "sharding/lookup_request_view.hh"

#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "sharding/index_wire.hh"

namespace {

namespace pb = ::inferencecache::v1alpha1;
namespace wire = ic::sharding::wire;

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_tag(std::string& out, int field, int wire_type) {
  put_varint(out, static_cast<std::uint64_t>(field) << 3 | static_cast<std::uint64_t>(wire_type));
}

void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_tag(out, field, 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}

bool decode(const std::string& bytes, wire::LookupRequestView& view) {
  return wire::decode(std::span<const char>(bytes.data(), bytes.size()), view);
}

// Every field of the two queries, element by element.
void check_same(const ic::index::LookupQuery& a, const ic::index::LookupQuery& b) {
  CHECK(a.tenant_id == b.tenant_id);
  CHECK(a.model_id == b.model_id);
  CHECK(a.hash_scheme == b.hash_scheme);
  CHECK(a.adapter_id == b.adapter_id);
  CHECK(a.prefix_hash == b.prefix_hash);
  CHECK(a.prefix_token_count == b.prefix_token_count);
  REQUIRE(a.block_hashes.size() == b.block_hashes.size());
  for (std::size_t i = 0; i < a.block_hashes.size(); ++i)
    CHECK(a.block_hashes[i] == b.block_hashes[i]);
  REQUIRE(a.block_token_counts.size() == b.block_token_counts.size());
  for (std::size_t i = 0; i < a.block_token_counts.size(); ++i)
    CHECK(a.block_token_counts[i] == b.block_token_counts[i]);
  REQUIRE(a.token_ids.size() == b.token_ids.size());
  for (std::size_t i = 0; i < a.token_ids.size(); ++i) CHECK(a.token_ids[i] == b.token_ids[i]);
  CHECK(a.has_prompt_text == b.has_prompt_text);
  CHECK(a.slo_ttft_ms == b.slo_ttft_ms);
}

// Decodes `bytes` both ways; returns whether the views took them, after
// checking that protobuf then parses them to the same query.
bool same_as_protobuf(const std::string& bytes) {
  wire::LookupRequestView view;
  if (!decode(bytes, view)) return false;
  pb::LookupRouteRequest message;
  REQUIRE(message.ParseFromString(bytes));
  std::vector<std::string_view> hashes;
  check_same(wire::to_query(view), wire::to_query(message, hashes));
  return true;
}

pb::LookupRouteRequest typical() {
  pb::LookupRouteRequest r;
  r.set_model_id("llama-3-8b");
  r.set_tenant_id("team-a");
  r.set_prefix_hash(std::string("\x00\xff\x10\x80", 4));
  r.set_prefix_token_count(128);
  r.set_hash_scheme("vllm-sha256");
  r.mutable_slo()->set_ttft_ms(250);
  r.mutable_slo()->set_tbt_ms(40);
  for (int i = 0; i < 8; ++i) {
    r.add_block_hashes(std::string("block-hash-\xfe\x01", 13) + std::to_string(i));
    r.add_block_token_counts(16);
  }
  r.add_token_ids(1);
  r.add_token_ids(300000);
  r.set_adapter_id("lora-7");
  return r;
}

TEST_CASE("lookup_request_view: a typical request decodes to protobuf's values") {
  const std::string bytes = typical().SerializeAsString();
  wire::LookupRequestView view;
  REQUIRE(decode(bytes, view));
  CHECK(view.model_id == "llama-3-8b");
  CHECK(view.tenant_id == "team-a");
  CHECK(view.prefix_hash == std::string_view("\x00\xff\x10\x80", 4));
  CHECK(view.prefix_token_count == 128);
  CHECK(view.hash_scheme == "vllm-sha256");
  CHECK(view.slo_ttft_ms == 250);
  REQUIRE(view.block_hashes.size() == 8);
  CHECK(view.block_hashes[7] == std::string_view("block-hash-\xfe\x01"
                                                 "7",
                                                 14));
  CHECK(view.block_token_counts == std::vector<std::int32_t>(8, 16));
  CHECK(view.token_ids == std::vector<std::uint32_t>{1, 300000});
  CHECK(view.adapter_id == "lora-7");
  CHECK(same_as_protobuf(bytes));
  CHECK(same_as_protobuf(""));  // the empty message
}

TEST_CASE("lookup_request_view: prompt_text, non-ASCII strings and unknown fields are protobuf's") {
  pb::LookupRouteRequest r = typical();
  r.set_prompt_text("hello");
  wire::LookupRequestView view;
  CHECK_FALSE(decode(r.SerializeAsString(), view));
  r = typical();
  r.set_tenant_id("t\xc3\xa9");  // valid UTF-8, but not ASCII: protobuf checks it
  CHECK_FALSE(decode(r.SerializeAsString(), view));
  std::string unknown = typical().SerializeAsString();
  put_tag(unknown, 12, 0);
  put_varint(unknown, 1);
  CHECK_FALSE(decode(unknown, view));
  std::string wrong_type = typical().SerializeAsString();
  put_tag(wrong_type, 2, 0);  // tenant_id as a varint: protobuf keeps it as unknown
  put_varint(wrong_type, 5);
  CHECK_FALSE(decode(wrong_type, view));
  std::string negative;
  put_tag(negative, 4, 0);
  put_varint(negative, static_cast<std::uint64_t>(-1));  // 10 bytes
  CHECK_FALSE(decode(negative, view));
  const std::string whole = typical().SerializeAsString();
  CHECK_FALSE(decode(whole.substr(0, whole.size() - 1), view));  // truncated
}

TEST_CASE("lookup_request_view: repeated occurrences follow protobuf") {
  std::string bytes;
  put_bytes(bytes, 2, "first");
  put_bytes(bytes, 2, "second");  // last one wins
  put_bytes(bytes, 10, "text");
  put_bytes(bytes, 10, "");  // prompt_text ends empty: the views take it
  std::string slo1, slo2;
  put_tag(slo1, 1, 0);
  put_varint(slo1, 90);
  put_tag(slo1, 2, 0);
  put_varint(slo1, 5);
  put_tag(slo2, 2, 0);
  put_varint(slo2, 6);
  put_bytes(bytes, 6, slo1);
  put_bytes(bytes, 6, slo2);  // merged: ttft_ms stays 90
  put_tag(bytes, 8, 0);       // unpacked element, then a packed run
  put_varint(bytes, 3);
  std::string run;
  put_varint(run, 4);
  put_varint(run, (std::uint64_t{1} << 34) | 5);  // 5 bytes: the low 32 bits
  put_bytes(bytes, 8, run);
  wire::LookupRequestView view;
  REQUIRE(decode(bytes, view));
  CHECK(view.tenant_id == "second");
  CHECK(view.slo_ttft_ms == 90);
  CHECK(view.block_token_counts == std::vector<std::int32_t>{3, 4, 5});
  CHECK(same_as_protobuf(bytes));
}

// A random field: mostly LookupRouteRequest's own with its wire type, else
// any number and type; contents mostly ASCII.
void random_field(std::mt19937& rng, std::string& out) {
  std::uniform_int_distribution<int> pick(0, 99);
  const int field = pick(rng) < 90 ? 1 + pick(rng) % 11 : 1 + pick(rng) % 20;
  const bool varint_field = field == 4 || ((field == 8 || field == 9) && pick(rng) < 40);
  int type = varint_field ? 0 : 2;
  if (pick(rng) < 5) type = pick(rng) % 6;
  put_tag(out, field, type);
  if (type == 0) {
    const int bytes = 1 + pick(rng) % 10;
    put_varint(out, (std::uint64_t{1} << (7 * bytes - 7)) | static_cast<std::uint64_t>(rng()));
    return;
  }
  if (type != 2) return;  // the rest of the message is what follows
  std::string body;
  const int n = pick(rng) % 24;
  for (int i = 0; i < n; ++i) {
    if ((field == 6 || field == 8 || field == 9) && pick(rng) < 70) {
      if (field == 6) put_tag(body, 1 + pick(rng) % 3, 0);
      put_varint(body, static_cast<std::uint64_t>(rng()) >> (pick(rng) % 32));
    } else {
      body.push_back(static_cast<char>(pick(rng) < 95 ? 32 + pick(rng) % 95 : 128 + pick(rng)));
    }
  }
  if (field == 10 && pick(rng) < 50) body.clear();
  put_varint(out, body.size());
  out += body;
}

TEST_CASE("lookup_request_view: on random and mutated bytes the views never disagree") {
  std::mt19937 rng(20261201);
  std::uniform_int_distribution<int> pick(0, 99);
  int taken = 0;
  constexpr int kMessages = 4000;
  for (int m = 0; m < kMessages; ++m) {
    std::string bytes;
    const int fields = pick(rng) % 12;
    for (int f = 0; f < fields; ++f) random_field(rng, bytes);
    if (!bytes.empty() && pick(rng) < 15) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    if (!bytes.empty() && pick(rng) < 10) bytes.resize(rng() % bytes.size());
    if (same_as_protobuf(bytes)) ++taken;
  }
  // A good share takes the fast path (the check above is not vacuous): 835 with
  // this seed on libstdc++; the rest have a foreign field, byte or encoding.
  CHECK(taken > kMessages / 8);
  MESSAGE("views took " << taken << " of " << kMessages);
}

}  // namespace
