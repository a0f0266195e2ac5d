#include "placement/copy_export.hh"

#include "persist/snapshot_codec.hh"

namespace ic::placement {

namespace {
constexpr std::size_t kSlice = 65536;  // entry slots per export_entries call
}  // namespace

std::vector<std::string> export_tenant(const index::Shard& shard, std::string_view tenant) {
  persist::ChunkBuilder builder;
  std::vector<std::string> chunks;
  std::uint32_t cursor = 0;
  bool done = false;
  while (!done) {
    done = shard.export_entries(&cursor, kSlice, [&](const index::EntryView& v) {
      if (v.tenant != tenant) return;
      builder.add_entry(v);
      if (builder.full()) chunks.push_back(builder.take());
    });
  }
  shard.export_stats([&](const index::StatsView& v) {
    if (v.tenant == tenant) builder.add_stats(v);
  });
  if (!builder.empty()) chunks.push_back(builder.take());
  return chunks;
}

void load_chunks(index::Shard& shard, const std::vector<std::string>& chunks) {
  persist::RestoreCounts counts;
  for (const std::string& bytes : chunks) {
    persist::state_pb::StateChunk chunk;
    if (!chunk.ParseFromString(bytes)) continue;
    // One shard of one: every tenant of the chunk is "owned" by it. Every
    // timestamp is stored, so the clock argument is never read.
    persist::restore_owned(chunk, shard, 0, 1, 0, &counts);
  }
}

}  // namespace ic::placement
