// Warm restart at scale (docs/persistence.md): fills a 2-shard index with
// 1,000,000 (key, replica) entries (62,500 16-block chains over 8 tenants ×
// 8 replicas), writes the state file as the server's final save does, loads
// it into a fresh index as the server's startup does, and prints each phase's
// wall time, the file size, whether 1,000 chain lookups answer the same, and
// the memory each index took: the RSS growth of filling it by ingest and of
// restoring it from the file (mimalloc's free pages handed back first, as
// the server does after its load), the load's peak over its start, and
// their ratio (docs/persistence.md "Bounds": restored ≤ 1.2 × ingest).
//
//   build/perf/state_restart [PATH [TENANTS]]   (default /tmp/ic-state-restart.bin, 8; kept
//   afterwards so `perf/warm_restart.sh` can start the real server on it)

#include <mimalloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "builders.hh"
#include "index/clock.hh"
#include "index/partition.hh"
#include "persist/snapshot_codec.hh"
#include "persist/state_saver.hh"
#include "sharding/index_wire.hh"
#include "text.hh"

namespace {

namespace pb = ic::sharding::wire::pb;
using Clock = std::chrono::steady_clock;

constexpr unsigned kCores = 2;
constexpr int kReplicas = 8, kBlocks = 16, kChains = 62'500;
// Tenants the chains spread over (argv[2]; 1 puts the whole index on one shard).
int kTenants = 8;

// The process's resident set now and at its peak (VmRSS, VmHWM), MB.
struct Rss {
  double now_mb = 0;
  double peak_mb = 0;
};
Rss rss() {
  Rss r;
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) r.now_mb = std::stod(line.substr(6)) / 1024;
    if (line.rfind("VmHWM:", 0) == 0) r.peak_mb = std::stod(line.substr(6)) / 1024;
  }
  return r;
}
// Hands mimalloc's free pages back (as the server does after its load) and
// restarts the peak counter (clear_refs 5).
Rss settled() {
  mi_collect(true);
  std::ofstream("/proc/self/clear_refs") << "5";
  return rss();
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string name(const char* prefix, int i) {
  return ic::itest::numbered(prefix, static_cast<long long>(i));
}

struct Index {
  ic::index::IndexGlobals globals;
  std::vector<std::unique_ptr<ic::index::Shard>> shards;
  Index() {
    ic::index::IndexConfig cfg;
    cfg.max_entries = 2'000'000;
    for (unsigned c = 0; c < kCores; ++c)
      shards.push_back(std::make_unique<ic::index::Shard>(cfg, &globals));
  }
  std::vector<ic::index::Shard*> pointers() {
    std::vector<ic::index::Shard*> out;
    for (auto& s : shards) out.push_back(s.get());
    return out;
  }
  ic::index::Shard& owner(const std::string& tenant) {
    return *shards[ic::index::owner_core(tenant, kCores)];
  }
};

pb::CacheStateUpdate chain(int i, std::int64_t ts) {
  pb::CacheStateUpdate u;
  u.set_tenant_id(name("tenant-", i % kTenants));
  u.set_model_id("llama");
  u.set_hash_scheme("vllm");
  u.set_replica_id(name("replica-", (i / kTenants) % kReplicas));
  u.set_timestamp_us(ts);
  auto* p = u.add_prefixes();
  for (int b = 0; b < kBlocks; ++b) {
    p->add_block_hashes(ic::test::block_hash(static_cast<std::uint64_t>(i) * kBlocks + b + 1));
    p->add_block_token_counts(16);
  }
  return u;
}

std::vector<std::string> answers(Index& idx, std::int64_t now) {
  ic::index::ManualClock clock;
  clock.wall = now;
  std::vector<std::string> out;
  for (int i = 0; i < 1000; ++i) {
    const pb::CacheStateUpdate u = chain(i * 61, 0);
    pb::LookupRouteRequest r;
    r.set_tenant_id(u.tenant_id());
    r.set_model_id(u.model_id());
    r.set_hash_scheme(u.hash_scheme());
    for (int b = 0; b < kBlocks; ++b) {
      r.add_block_hashes(u.prefixes(0).block_hashes(b));
      r.add_block_token_counts(16);
    }
    ic::index::LookupContext ctx;
    ctx.clock = &clock;
    pb::LookupRouteResponse resp;
    ic::sharding::wire::lookup_route(idx.owner(r.tenant_id()), r, ctx, &resp);
    resp.set_lookup_latency_us(0);
    out.push_back(resp.SerializeAsString());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "/tmp/ic-state-restart.bin";
  if (argc > 2) kTenants = std::max(1, std::atoi(argv[2]));
  // Real wall time, so a server started on the file keeps the entries fresh.
  const std::int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  mi_option_set(mi_option_decommit_delay, 0);
  mi_option_set(mi_option_segment_decommit_delay, 0);
  const Rss empty = settled();
  Index before;
  auto t0 = Clock::now();
  for (int i = 0; i < kChains; ++i)
    ic::sharding::wire::ingest(before.owner(name("tenant-", i % kTenants)), chain(i, now), now);
  const double fill_s = seconds_since(t0);
  const Rss filling = rss();
  const Rss filled = settled();
  const double fill_mb = filled.now_mb - empty.now_mb;
  std::printf("fill      %8.3f s  entries %lld  +%.1f MB RSS (peak +%.1f MB)\n", fill_s,
              static_cast<long long>(before.globals.total_entries.load()), fill_mb,
              filling.peak_mb - empty.now_mb);

  t0 = Clock::now();
  ic::persist::state_pb::StateHeader header;
  header.set_server_version("bench");
  header.set_created_at_us(now);
  std::string error;
  auto writer = ic::persist::StateFileWriter::create(path, header, &error);
  if (!writer) {
    std::fprintf(stderr, "state_restart: %s\n", error.c_str());
    return 1;
  }
  ic::persist::ChunkBuilder builder;
  for (ic::index::Shard* shard : before.pointers()) {
    std::uint32_t cursor = 0;
    for (bool done = false; !done;) {
      done = shard->export_entries(&cursor, 16384,
                                   [&](const ic::index::EntryView& v) { builder.add_entry(v); });
      if (!builder.empty()) writer->append_chunk(builder.take());
    }
  }
  if (std::string e = writer->commit(); !e.empty()) {
    std::fprintf(stderr, "state_restart: %s\n", e.c_str());
    return 1;
  }
  std::printf("save      %8.3f s  %.1f MB (%.1f bytes/entry)\n", seconds_since(t0),
              static_cast<double>(writer->bytes_written()) / 1e6,
              static_cast<double>(writer->bytes_written()) / 1e6);

  // The phases of a load, timed apart: read + checksum, then parse + ingest.
  {
    Index scratch;
    t0 = Clock::now();
    const ic::persist::StateFileContents file = ic::persist::read_state_file(path);
    std::printf("  read+verify %6.3f s\n", seconds_since(t0));
    t0 = Clock::now();
    std::size_t parsed = 0;
    for (std::string_view c : file.chunks) {
      ic::persist::state_pb::StateChunk chunk;
      parsed += chunk.ParseFromArray(c.data(), static_cast<int>(c.size())) ? 1 : 0;
    }
    std::printf("  parse       %6.3f s  %zu chunks\n", seconds_since(t0), parsed);
    t0 = Clock::now();
    ic::persist::RestoreCounts counts;
    for (std::string_view c : file.chunks)
      ic::persist::restore_chunk(c, scratch.pointers(), now, &counts);
    std::printf("  parse+apply %6.3f s\n", seconds_since(t0));
  }
  const Rss start = settled();
  Index after;
  t0 = Clock::now();
  const ic::persist::LoadOutcome got = ic::persist::load_state(path, after.pointers(), now);
  const double load_s = seconds_since(t0);
  const Rss loaded = rss();
  const Rss returned = settled();
  const double load_mb = returned.now_mb - start.now_mb;
  std::printf(
      "load      %8.3f s  %s, entries %lld  +%.1f MB RSS (+%.1f before mi_collect, peak +%.1f "
      "MB)  %.2f x fill\n",
      load_s, std::string(ic::persist::load_status_name(got.status)).c_str(),
      static_cast<long long>(got.entries), load_mb, loaded.now_mb - start.now_mb,
      loaded.peak_mb - start.now_mb, load_mb / fill_mb);
  const bool same = answers(before, now) == answers(after, now);
  std::printf("answers   %s (1,000 chain lookups)\n", same ? "identical" : "DIFFERENT");
  return same && got.status == ic::persist::LoadStatus::kOk ? 0 : 1;
}
