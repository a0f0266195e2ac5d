// Shard export → StateChunk → restore (src/persist/snapshot_codec.hh) and
// load_state(): a restored index answers exactly as the saved one did.

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "../index/helpers.hh"
#include "index/partition.hh"
#include "persist/snapshot_codec.hh"
#include "persist/state_saver.hh"
#include "support/temp_dir.hh"

namespace ic::persist {
namespace {

using namespace ic::index::test;

constexpr unsigned kCores = 2;

// Two shards sharing globals, routed by owner_core like the server's.
struct Index {
  index::IndexGlobals globals;
  index::ManualClock clock;
  std::vector<std::unique_ptr<index::Shard>> shards;
  explicit Index(std::shared_ptr<const config::PolicySet> policies = nullptr) {
    clock.wall = kNow;
    clock.mono = 5'000'000;
    index::IndexConfig cfg;
    cfg.ranking = config::Ranking::kReference;  // scores without transient load
    for (unsigned c = 0; c < kCores; ++c)
      shards.push_back(std::make_unique<index::Shard>(cfg, &globals, policies));
  }
  std::vector<index::Shard*> pointers() {
    std::vector<index::Shard*> out;
    for (auto& s : shards) out.push_back(s.get());
    return out;
  }
  index::Shard& owner(const std::string& tenant) {
    return *shards[index::owner_core(tenant, kCores)];
  }
  void ingest(const pb::CacheStateUpdate& u) {
    ic::sharding::wire::ingest(owner(u.tenant_id()), u, clock.wall);
  }
  void event(pb::CacheEvent::Type type, const std::string& tenant, const std::string& replica,
             std::int64_t ts) {
    pb::CacheEvent ev;
    ev.set_type(type);
    ev.set_tenant_id(tenant);
    ev.set_model_id("m");
    ev.set_replica_id(replica);
    ev.set_timestamp_us(ts);
    ic::sharding::wire::apply_event(owner(tenant), ev, clock.wall);
  }
  std::string lookup(const pb::LookupRouteRequest& r) {
    index::LookupContext ctx;
    ctx.clock = &clock;
    pb::LookupRouteResponse out;
    ic::sharding::wire::lookup_route(owner(r.tenant_id()), r, ctx, &out);
    return out.ShortDebugString();
  }
};

using EntryRow = std::tuple<std::string, std::string, std::string, std::string, std::string,
                            std::string, std::int32_t, std::int64_t, std::int32_t>;
using StatsRow = std::tuple<std::string, std::string, std::string, std::int64_t, double, double,
                            std::int64_t, std::int64_t, std::int64_t, std::int64_t>;

std::vector<EntryRow> entries_of(Index& idx) {
  std::vector<EntryRow> rows;
  for (auto& shard : idx.shards) {
    std::uint32_t cursor = 0;
    while (!shard->export_entries(&cursor, 3, [&](const index::EntryView& v) {
      rows.emplace_back(std::string(v.tenant), std::string(v.model), std::string(v.hash_scheme),
                        std::string(v.adapter), std::string(v.prefix_hash), std::string(v.replica),
                        v.token_count, v.last_seen_us, v.tier);
    })) {
    }
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

std::vector<StatsRow> stats_of(Index& idx) {
  std::vector<StatsRow> rows;
  for (auto& shard : idx.shards) {
    shard->export_stats([&](const index::StatsView& v) {
      rows.emplace_back(std::string(v.tenant), std::string(v.model), std::string(v.replica),
                        v.cache_memory_bytes, v.hit_rate, v.pressure, v.t2_hit_tokens,
                        v.t2_query_tokens, v.stats_reported_us, v.last_seen_us);
    });
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

// Chunks of at most `per_chunk` entries, every shard, stats last.
std::vector<std::string> save(Index& idx, std::size_t per_chunk) {
  std::vector<std::string> chunks;
  ChunkBuilder b(per_chunk);
  for (auto& shard : idx.shards) {
    std::uint32_t cursor = 0;
    for (bool done = false; !done;) {
      done = shard->export_entries(&cursor, per_chunk,
                                   [&](const index::EntryView& v) { b.add_entry(v); });
      if (done) shard->export_stats([&](const index::StatsView& v) { b.add_stats(v); });
      if (!b.empty()) chunks.push_back(b.take());
    }
  }
  return chunks;
}

void fill(Index& idx) {
  idx.ingest(chain_update("team-a", "m", "vllm", "r1", kNow - 2 * kMin, {1, 2, 3, 4}));
  idx.ingest(chain_update("team-a", "m", "vllm", "r2", kNow - kMin, {1, 2}, 2));
  idx.ingest(chain_update("team-a", "m", "vllm", "r2", kNow - kMin, {7, 8}, 0, "lora-x"));
  idx.ingest(exact_update("team-b", "m", "sglang", "r3", kNow, {{42, 100}, {43, 200}}, 3));
  idx.ingest(exact_update("team-b", "m", "sglang", "r4", kNow, {{42, 100}}, 7));  // unknown tier
  for (int t = 0; t < 6; ++t) {
    std::string tenant = "t";  // (not "t" + ...: gcc 12's -Wrestrict false positive)
    tenant.append(std::to_string(t));
    idx.ingest(chain_update(tenant, "m", "vllm", "r1", kNow - t, {100u + t}));
  }
  pb::CacheStateUpdate stats;
  stats.set_tenant_id("team-a");
  stats.set_model_id("m");
  stats.set_replica_id("r1");
  stats.set_timestamp_us(kNow - 3 * kMin);
  stats.mutable_stats()->set_hit_rate(0.25f);
  stats.mutable_stats()->set_pressure(0.5f);
  stats.mutable_stats()->set_cache_memory_bytes(1 << 20);
  stats.mutable_stats()->set_t2_hit_tokens(11);
  stats.mutable_stats()->set_t2_query_tokens(22);
  idx.ingest(stats);
  idx.event(pb::CacheEvent::REPLICA_UPDATED, "team-a", "r1", kNow - kMin / 2);
  stats.set_replica_id("r9");  // stats only, liveness = the report
  stats.set_tenant_id("team-b");
  idx.ingest(stats);
}

std::vector<pb::LookupRouteRequest> probes() {
  return {chain_req("team-a", "m", "vllm", {1, 2, 3, 4, 5}),
          chain_req("team-a", "m", "vllm", {1, 2, 9}),
          chain_req("team-a", "m", "vllm", {9}),
          exact_req("team-b", "m", "sglang", 42, 100),
          exact_req("team-b", "m", "sglang", 43, 200),
          exact_req("team-b", "m", "sglang", 44, 1),
          chain_req("t3", "m", "vllm", {103}),
          chain_req("nobody", "m", "vllm", {1})};
}

TEST_CASE("a restored index holds the same entries and stats and answers the same lookups") {
  Index before;
  fill(before);
  const std::vector<std::string> chunks = save(before, 3);
  CHECK(chunks.size() >= 5);  // 17 entries in chunks of ≤ 3 per shard, plus stats

  Index after;
  RestoreCounts counts;
  for (const std::string& c : chunks)
    REQUIRE(restore_chunk(c, after.pointers(), after.clock.wall, &counts));
  CHECK(counts.entries == 17);
  CHECK(counts.stats == 2);
  CHECK(counts.chunks == static_cast<std::int64_t>(chunks.size()));
  CHECK(after.globals.total_entries.load() == 17);

  const std::vector<EntryRow> rows = entries_of(after);
  CHECK(rows == entries_of(before));
  REQUIRE(rows.size() == 17);
  CHECK(stats_of(after) == stats_of(before));
  const StatsRow r1{"team-a", "m", "r1", 1 << 20,         0.25,
                    0.5,      11,  22,   kNow - 3 * kMin, kNow - kMin / 2};
  CHECK(stats_of(after)[0] == r1);
  for (const auto& probe : probes()) {
    CAPTURE(probe.ShortDebugString());
    CHECK(after.lookup(probe) == before.lookup(probe));
  }
  CHECK(after.lookup(probes()[0]).find("PREFIX_MATCH") != std::string::npos);
  CHECK(after.lookup(probes()[4]).find("r3") != std::string::npos);
}

TEST_CASE("a chunk that does not parse is refused without applying anything") {
  Index idx;
  RestoreCounts counts;
  CHECK_FALSE(restore_chunk("\xff\xff\xff", idx.pointers(), idx.clock.wall, &counts));
  CHECK(counts.chunks == 0);
  CHECK(idx.globals.total_entries.load() == 0);
}

TEST_CASE("load_state restores a verified file whole and a bad one not at all") {
  Index before;
  fill(before);
  ic::test::TempDir tmp("ic-load");
  const std::string state = tmp.file("state.bin");
  std::string error;
  state_pb::StateHeader h;
  h.set_server_version("0.1.0");
  h.set_created_at_us(kNow);
  h.set_policy_json(R"({"version":7})");
  {
    auto w = StateFileWriter::create(state, h, &error);
    REQUIRE(w != nullptr);
    for (const std::string& c : save(before, 4)) REQUIRE(w->append_chunk(c));
    REQUIRE(w->commit().empty());
  }
  Index after;
  const LoadOutcome got = load_state(state, after.pointers(), after.clock.wall);
  CHECK(got.status == LoadStatus::kOk);
  CHECK(got.entries == 17);
  CHECK(got.policy_json == R"({"version":7})");
  CHECK(got.server_version == "0.1.0");
  CHECK(got.created_at_us == kNow);
  CHECK(entries_of(after) == entries_of(before));

  // Framing and checksum intact, one chunk garbage: nothing is applied.
  {
    auto w = StateFileWriter::create(state, h, &error);
    REQUIRE(w != nullptr);
    for (const std::string& c : save(before, 4)) REQUIRE(w->append_chunk(c));
    REQUIRE(w->append_chunk("\xff\xff\xff"));
    REQUIRE(w->commit().empty());
  }
  Index cold;
  const LoadOutcome bad = load_state(state, cold.pointers(), cold.clock.wall);
  CHECK(bad.status == LoadStatus::kCorrupt);
  CHECK(bad.error == "unparsable chunk");
  CHECK(bad.entries == 0);
  CHECK(cold.globals.total_entries.load() == 0);
}

// Writes `before`'s entries to `path` in chunks of `per_chunk`, `copies` times over.
void write_state(const std::string& path, Index& before, std::size_t per_chunk, int copies = 1) {
  std::string error;
  state_pb::StateHeader h;
  h.set_server_version("0.1.0");
  auto w = StateFileWriter::create(path, h, &error);
  REQUIRE(w != nullptr);
  for (int i = 0; i < copies; ++i)
    for (const std::string& c : save(before, per_chunk)) REQUIRE(w->append_chunk(c));
  REQUIRE(w->commit().empty());
}

TEST_CASE("load_state applies in batches and counts the entries the index kept, not the file's") {
  Index before;
  fill(before);
  ic::test::TempDir tmp("ic-load");
  const std::string state = tmp.file("state.bin");
  write_state(state, before, 2);
  // Batches of one chunk: the same index as one batch.
  Index after;
  LoadOptions one_chunk;
  one_chunk.batch_bytes = 1;
  const LoadOutcome got = load_state(state, after.pointers(), after.clock.wall, one_chunk);
  CHECK(got.status == LoadStatus::kOk);
  CHECK(got.entries == 17);
  CHECK(got.file_entries == 17);
  CHECK(entries_of(after) == entries_of(before));
  CHECK(stats_of(after) == stats_of(before));

  // team-a may keep one distinct key: the file's 17 entries are not all kept.
  const auto quota = config::parse_policy_json(
      R"({"version":7,"tenants":[{"tenantID":"team-a","maxIndexEntries":1}]})");
  REQUIRE(quota.ok());
  Index capped(quota.set);
  const LoadOutcome kept = load_state(state, capped.pointers(), capped.clock.wall);
  CHECK(kept.status == LoadStatus::kOk);
  CHECK(kept.file_entries == 17);
  CHECK(kept.entries == static_cast<std::int64_t>(entries_of(capped).size()));
  CHECK(kept.entries == capped.globals.total_entries.load());
  CHECK(kept.entries < 17);
}

TEST_CASE(
    "load_state stops at the next record once interrupted, and a first pass applies nothing") {
  Index before;
  fill(before);
  ic::test::TempDir tmp("ic-load");
  const std::string state = tmp.file("state.bin");
  write_state(state, before, 1, 4);  // 4 × 17 one-entry chunks (and the stats chunks)
  int polls = 0;
  LoadOptions options;
  options.interrupted = [&polls] { return ++polls > 10; };
  Index cold;
  const LoadOutcome got = load_state(state, cold.pointers(), cold.clock.wall, options);
  CHECK(got.interrupted);
  CHECK(got.status == LoadStatus::kUnreadable);
  CHECK(got.error == "interrupted by a signal");
  CHECK(polls == 11);  // the verify pass: one poll per record, stopped at the 11th
  CHECK(cold.globals.total_entries.load() == 0);
  CHECK(got.entries == 0);
}

TEST_CASE("a parsed policy set keeps the JSON it came from, for the state file") {
  const std::string body = R"({"version":7,"policies":[{"namespace":"team-a"}]})";
  const auto parsed = config::parse_policy_json(body);
  REQUIRE(parsed.ok());
  CHECK(parsed.set->source_json() == body);
  CHECK(config::PolicySet::defaults()->source_json().empty());
}

}  // namespace
}  // namespace ic::persist
