// ReplicaState and Pipeline on decoded fixtures and generated events: the exact prefix entries
// and events sent to the server (docs/kvevents.md "What reaches the server").
#include <doctest/doctest.h>

#include <set>
#include <span>

#include "block_events.hh"
#include "fingerprint/fingerprint.hh"
#include "fixtures.hh"
#include "kvevents/decode.hh"
#include "kvevents/encode.hh"
#include "kvevents/pipeline.hh"

namespace ic::tools::kvevents {
namespace {

namespace v1 = inferencecache::v1alpha1;
using test::kQwenBlock;
using test::store;

// Records what the pipeline pushes.
struct Recorder final : Outbox {
  std::vector<Outbound> messages;
  void push(Outbound m, std::size_t) override { messages.push_back(std::move(m)); }

  // One line per message: "add <hash hex> <tokens> T<tier> <adapter>" per entry, or
  // "evict <hash hex> <adapter>" / "cleared".
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    for (const auto& m : messages) {
      if (const auto* u = std::get_if<v1::CacheStateUpdate>(&m)) {
        for (const auto& p : u->prefixes()) {
          out.push_back("add " + hex(p.prefix_hash()) + " " + std::to_string(p.token_count()) +
                        " T" + std::to_string(p.tier()) + " " + p.adapter_id() + " @" +
                        u->replica_id());
        }
      } else {
        const auto& e = std::get<v1::CacheEvent>(m);
        out.push_back(e.type() == v1::CacheEvent::ALL_CLEARED
                          ? "cleared @" + e.replica_id()
                          : "evict " + hex(e.prefix_hash()) + " " + e.adapter_id() + " @" +
                                e.replica_id());
      }
    }
    return out;
  }

  static std::string hex(const std::string& bytes) {
    static const char* d = "0123456789abcdef";
    std::string s;
    for (unsigned char c : bytes) {
      s += d[c >> 4];
      s += d[c & 15];
    }
    return s;
  }
};

std::string hex64(std::uint64_t v) {
  const auto w = fingerprint::to_wire(v);
  return Recorder::hex(std::string(w.begin(), w.end()));
}

std::uint64_t prefix_of(const std::vector<std::uint32_t>& tokens, std::size_t block,
                        std::optional<std::uint64_t> parent = std::nullopt) {
  return fingerprint::prefix_hashes(std::span(tokens), 16, parent).at(block);
}

struct Harness {
  Counters counters;
  Recorder out;
  Pipeline pipeline;
  explicit Harness(StateOptions options = {})
      : pipeline(Identity{"t", "m", "vllm"}, std::move(options), 100'000, counters, out) {}

  void apply_fixture(const std::string& name, const std::string& replica = "r") {
    const auto r = decode_batch(test::fixture(name));
    REQUIRE(r.batch.has_value());
    for (const auto& e : r.batch->events) pipeline.apply(replica, e, Pipeline::Clock::now());
    pipeline.flush_all();
  }
  std::uint64_t count(Metric m) const { return counters.get(m); }
};

std::vector<std::uint32_t> twice(const std::vector<std::uint32_t>& v) {
  auto out = v;
  out.insert(out.end(), v.begin(), v.end());
  return out;
}

BlockRemoved remove(std::vector<std::uint64_t> hashes, std::optional<std::string> medium = "GPU") {
  BlockRemoved r;
  r.block_hashes = std::move(hashes);
  r.medium = std::move(medium);
  return r;
}

}  // namespace

TEST_CASE("v0.23 store, remove, clear: one add, flush, evict, cleared") {
  Harness h;
  h.apply_fixture("vllm_array_v0.23_store_remove_clear");
  const std::string p0 = hex64(prefix_of(kQwenBlock, 0));
  CHECK(h.out.lines() ==
        std::vector<std::string>{"add " + p0 + " 16 T1  @r", "evict " + p0 + "  @r", "cleared @r"});
  CHECK(h.count(Metric::events_stored) == 1);
  CHECK(h.count(Metric::events_removed) == 1);
  CHECK(h.count(Metric::events_cleared) == 1);
}

TEST_CASE("v0.26 map batch gives exactly what the v0.23 array batch gives") {
  Harness a, m;
  a.apply_fixture("vllm_array_v0.23_store_remove_clear");
  m.apply_fixture("vllm_map_v0.26");
  CHECK(a.out.lines() == m.out.lines());
}

TEST_CASE("v0.22: a group-0 store and removal") {
  Harness h;
  h.apply_fixture("vllm_array_v0.22_full");
  const std::string p0 = hex64(prefix_of(kQwenBlock, 0));
  CHECK(h.out.lines() ==
        std::vector<std::string>{"add " + p0 + " 16 T1  @r", "evict " + p0 + "  @r"});
}

TEST_CASE("v0.9: two blocks chain to 16 and 32 tokens; removing the first evicts only it") {
  Harness h;
  h.apply_fixture("vllm_array_v0.9_original");
  const auto tokens = twice(kQwenBlock);
  const std::string p0 = hex64(prefix_of(tokens, 0));
  const std::string p1 = hex64(prefix_of(tokens, 1));
  CHECK(h.out.lines() == std::vector<std::string>{"add " + p0 + " 16 T1  @r",
                                                  "add " + p1 + " 32 T1  @r",
                                                  "evict " + p0 + "  @r"});
}

TEST_CASE("bin hashes and LoRA names index like any other block") {
  Harness bytes, lora;
  bytes.apply_fixture("vllm_array_bytes_hashes");
  lora.apply_fixture("vllm_map_lora");
  const std::string p0 = hex64(prefix_of(kQwenBlock, 0));
  CHECK(bytes.out.lines() == std::vector<std::string>{"add " + p0 + " 16 T1  @r"});
  CHECK(lora.out.lines() == std::vector<std::string>{"add " + p0 + " 16 T1 adapter-116 @r"});
}

TEST_CASE(
    "SGLang: negative hashes chain through the parent; a CPU_PINNED removal of a GPU block "
    "is not an eviction") {
  Harness h;
  h.apply_fixture("sglang_array_signed_int64");
  const auto tokens = twice(kQwenBlock);
  CHECK(h.out.lines() ==
        std::vector<std::string>{"add " + hex64(prefix_of(tokens, 0)) + " 16 T1  @r",
                                 "add " + hex64(prefix_of(tokens, 1)) + " 32 T1  @r"});
  CHECK(h.count(Metric::unknown_removals) == 1);
}

TEST_CASE("salted blocks chain onto the salt's root, never onto the unsalted root") {
  for (const char* name : {"sglang_array_salted", "sglang_map"}) {
    StateOptions options;
    options.engine_block_size = 2;
    Harness h(options);
    h.apply_fixture(name);
    const std::vector<std::uint32_t> tokens = {1, 2};
    const std::uint64_t salted =
        fingerprint::prefix_hashes(std::span(tokens), 2, salt_root("tenant-a"))[0];
    CHECK(salted != fingerprint::prefix_hashes(std::span(tokens), 2)[0]);
    CHECK(h.out.lines() == std::vector<std::string>{"add " + hex64(salted) + " 2 T1  @r"});
  }
}

TEST_CASE("an array batch and a map batch of the same generated events give identical messages") {
  Batch batch;
  batch.ts = 12.5;
  batch.dp_rank = 0;
  auto s1 = store({11, 12}, twice(kQwenBlock));
  auto s2 = store({13}, kQwenBlock, 12);
  s2.lora_name = "sql";
  auto s3 = store({14}, kQwenBlock);
  s3.cache_salt = "tenant-b";
  s3.medium = "CPU";
  batch.events = {s1, s2, s3, remove({11}), remove({12}), AllBlocksCleared{}, s1};
  Harness a, m;
  for (auto enc : {Encoding::array, Encoding::map}) {
    Harness& h = enc == Encoding::array ? a : m;
    const auto r = decode_batch(encode_batch(batch, enc, enc == Encoding::map));
    REQUIRE(r.batch.has_value());
    CHECK(r.batch->malformed_events == 0);
    for (const auto& e : r.batch->events) h.pipeline.apply("r", e, Pipeline::Clock::now());
    h.pipeline.flush_all();
  }
  CHECK(a.out.lines().size() == 9);
  CHECK(a.out.lines() == m.out.lines());
  // Byte for byte, too.
  REQUIRE(a.out.messages.size() == m.out.messages.size());
  for (std::size_t i = 0; i < a.out.messages.size(); ++i) {
    auto bytes = [](const Outbound& o) {
      return std::visit([](const auto& msg) { return msg.SerializeAsString(); }, o);
    };
    CHECK(bytes(a.out.messages[i]) == bytes(m.out.messages[i]));
  }
}

TEST_CASE("duplicate copies: evicted only when the last copy goes") {
  Harness h;
  const std::string p0 = hex64(prefix_of(kQwenBlock, 0));
  h.pipeline.apply("r", store({7}, kQwenBlock), {});
  h.pipeline.apply("r", store({7}, kQwenBlock), {});
  h.pipeline.apply("r", remove({7}), {});
  h.pipeline.flush_all();
  CHECK(h.out.lines() == std::vector<std::string>{"add " + p0 + " 16 T1  @r"});
  CHECK(h.count(Metric::duplicate_blocks) == 1);
  h.pipeline.apply("r", remove({7}), {});
  CHECK(h.out.lines().back() == "evict " + p0 + "  @r");
  h.pipeline.apply("r", remove({7}), {});
  CHECK(h.count(Metric::unknown_removals) == 1);
}

TEST_CASE(
    "tiers: a CPU copy keeps the block at T2 when the GPU copy goes; a GPU store moves it back") {
  Harness h;
  const std::string p0 = hex64(prefix_of(kQwenBlock, 0));
  auto cpu = store({7}, kQwenBlock);
  cpu.medium = "CPU";
  h.pipeline.apply("r", store({7}, kQwenBlock), {});
  h.pipeline.apply("r", cpu, {});
  h.pipeline.apply("r", remove({7}, "GPU"), {});
  h.pipeline.apply("r", store({7}, kQwenBlock), {});
  h.pipeline.apply("r", remove({7}, "GPU"), {});
  h.pipeline.apply("r", remove({7}, "CPU"), {});
  h.pipeline.flush_all();
  CHECK(h.out.lines() ==
        std::vector<std::string>{"add " + p0 + " 16 T1  @r", "add " + p0 + " 16 T2  @r",
                                 "add " + p0 + " 16 T1  @r", "add " + p0 + " 16 T2  @r",
                                 "evict " + p0 + "  @r"});
}

TEST_CASE("--ignore-block-removed re-reports the last GPU copy at T2 instead of evicting") {
  StateOptions options;
  options.ignore_block_removed = true;
  Harness h(options);
  const std::string p0 = hex64(prefix_of(kQwenBlock, 0));
  h.pipeline.apply("r", store({7}, kQwenBlock), {});
  h.pipeline.apply("r", remove({7}), {});
  h.pipeline.flush_all();
  CHECK(h.out.lines() ==
        std::vector<std::string>{"add " + p0 + " 16 T1  @r", "add " + p0 + " 16 T2  @r"});
}

TEST_CASE("dropped stores: unmapped lora_id, block count mismatch, unknown parent, group 1") {
  StateOptions options;
  options.lora_names = {{7, "sql-lora"}};
  Harness h(options);
  auto mapped = store({1}, kQwenBlock);
  mapped.lora_id = 7;
  auto unmapped = store({2}, kQwenBlock);
  unmapped.lora_id = 9;
  auto mismatch = store({3, 4}, kQwenBlock);
  auto orphan = store({5}, kQwenBlock, 999);
  auto group1 = store({6}, kQwenBlock);
  group1.group_idx = 1;
  BlockRemoved group1_removal = remove({1});
  group1_removal.group_idx = 1;
  for (const Event& e :
       std::vector<Event>{mapped, unmapped, mismatch, orphan, group1, group1_removal}) {
    h.pipeline.apply("r", e, {});
  }
  h.pipeline.flush_all();
  CHECK(h.out.lines() ==
        std::vector<std::string>{"add " + hex64(prefix_of(kQwenBlock, 0)) + " 16 T1 sql-lora @r"});
  CHECK(h.count(Metric::dropped_lora_unmapped) == 1);
  CHECK(h.count(Metric::dropped_block_count_mismatch) == 1);
  CHECK(h.count(Metric::dropped_unknown_parent) == 1);
  CHECK(h.count(Metric::group_skipped) == 2);
}

TEST_CASE("a block size other than --engine-block-size is indexed and counted") {
  Harness h;
  auto big = store({1}, twice(kQwenBlock));
  big.block_size = 32;
  h.pipeline.apply("r", big, {});
  h.pipeline.apply("r", big, {});
  CHECK(h.count(Metric::block_size_mismatch) == 2);
  CHECK(h.count(Metric::duplicate_blocks) == 1);
}

TEST_CASE("snapshot: ALL_CLEARED then every tracked block at its tier, per replica") {
  Harness h;
  h.pipeline.apply("r", store({1, 2}, twice(kQwenBlock)), {});
  h.pipeline.flush_all();
  h.out.messages.clear();
  h.pipeline.snapshot({"r", "r2"});
  auto lines = h.out.lines();
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == "cleared @r");
  std::sort(lines.begin() + 1, lines.begin() + 3);
  std::vector<std::string> adds = {"add " + hex64(prefix_of(twice(kQwenBlock), 0)) + " 16 T1  @r",
                                   "add " + hex64(prefix_of(twice(kQwenBlock), 1)) + " 32 T1  @r"};
  std::sort(adds.begin(), adds.end());
  CHECK(std::vector<std::string>(lines.begin() + 1, lines.begin() + 3) == adds);
  CHECK(lines[3] == "cleared @r2");
}

TEST_CASE("over --max-tracked-blocks the replica resyncs") {
  StateOptions options;
  options.max_blocks = 1;
  Harness h(options);
  h.pipeline.apply("r", store({1, 2}, twice(kQwenBlock)), {});
  CHECK(h.count(Metric::resync_capacity) == 1);
  CHECK(h.pipeline.tracked_blocks() == 0);
  CHECK(h.out.lines().back() == "cleared @r");
}

TEST_CASE("adds wait for the window, and 4,096 entries flush early") {
  Harness h;
  const auto t0 = Pipeline::Clock::now();
  h.pipeline.apply("r", store({1}, kQwenBlock), t0);
  h.pipeline.flush_due(t0 + std::chrono::milliseconds(99));
  CHECK(h.out.messages.empty());
  h.pipeline.flush_due(t0 + std::chrono::milliseconds(100));
  CHECK(h.out.messages.size() == 1);
  BlockStored many;
  many.block_size = 1;
  for (std::uint32_t i = 0; i < 5000; ++i) {
    many.block_hashes.push_back(100 + i);
    many.token_ids.push_back(i);
  }
  h.pipeline.apply("r", many, t0);
  REQUIRE(h.out.messages.size() == 2);
  CHECK(std::get<v1::CacheStateUpdate>(h.out.messages[1]).prefixes_size() == 4096);
  const auto& u = std::get<v1::CacheStateUpdate>(h.out.messages[1]);
  CHECK(u.replica_id() == "r");
  CHECK(u.tenant_id() == "t");
  CHECK(u.model_id() == "m");
  CHECK(u.hash_scheme() == "vllm");
}

TEST_CASE("refresh: every interval each tracked block is re-reported, 4,096 per turn") {
  Counters counters;
  Recorder out;
  Pipeline pipeline(Identity{"t", "m", "vllm"}, {}, 100'000, counters, out, 1'000'000);
  const auto t0 = Pipeline::Clock::now();
  const auto s = std::chrono::seconds(1);
  pipeline.apply("r", store({1, 2}, twice(kQwenBlock)), t0);
  BlockStored many;
  many.block_size = 1;
  for (std::uint32_t i = 0; i < 5000; ++i) {
    many.block_hashes.push_back(100 + i);
    many.token_ids.push_back(i);
  }
  pipeline.apply("r", many, t0);
  pipeline.apply("r", remove({100}), t0);
  pipeline.flush_all();
  // What a full pass must re-send: every add but the evicted block's.
  std::multiset<std::string> want;
  std::string evicted;
  for (const auto& line : out.lines()) {
    if (line.rfind("add ", 0) == 0) want.insert(line);
    if (line.rfind("evict ", 0) == 0) evicted = line.substr(6, 16);
  }
  REQUIRE(want.size() == 5002);
  REQUIRE(evicted.size() == 16);
  want.erase(want.find("add " + evicted + " 1 T1  @r"));
  out.messages.clear();

  pipeline.refresh_due(t0);  // first look: the clock starts
  pipeline.refresh_due(t0 + s - std::chrono::microseconds(1));
  pipeline.flush_all();
  CHECK(out.messages.empty());
  pipeline.refresh_due(t0 + s);  // a pass starts: the first 4,096 blocks
  CHECK(counters.get(Metric::refreshed_blocks) == 4096);
  pipeline.refresh_due(t0 + s);  // the other 905
  CHECK(counters.get(Metric::refreshed_blocks) == 5001);
  pipeline.flush_all();
  const auto lines = out.lines();
  CHECK(std::multiset<std::string>(lines.begin(), lines.end()) == want);

  pipeline.refresh_due(t0 + 2 * s - std::chrono::microseconds(1));  // the next pass is not due
  CHECK(counters.get(Metric::refreshed_blocks) == 5001);
  pipeline.refresh_due(t0 + 2 * s);
  CHECK(counters.get(Metric::refreshed_blocks) == 5001 + 4096);
  pipeline.apply("r", AllBlocksCleared{}, t0 + 2 * s);  // the rest is gone before its turn
  pipeline.refresh_due(t0 + 2 * s);
  CHECK(counters.get(Metric::refreshed_blocks) == 5001 + 4096);
}

}  // namespace ic::tools::kvevents
