// Snapshot chunking (src/replication/snapshot.cc, docs/replication.md
// "Snapshots"): exact chunk layout and manifest; a join refuses a missing,
// foreign, misplaced or altered chunk.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "replication/snapshot.hh"
#include "xxhash.h"

namespace ic::replication {
namespace {

std::string file_of(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s.push_back(static_cast<char>('a' + i % 26));
  return s;
}

std::string chunk_data(const std::string& body) {
  state_pb::SnapshotChunk c;
  REQUIRE(c.ParseFromString(body));
  return c.data();
}

TEST_CASE("a state file splits into fixed-size chunks and a manifest; joined back whole") {
  const std::string file = file_of(10);
  const SnapshotParts parts = split_snapshot(file, "h/1/2", 42, 777, 4);
  CHECK(parts.manifest.snapshot_id() == "h/1/2");
  CHECK(parts.manifest.stream_sequence() == 42);
  CHECK(parts.manifest.created_at_us() == 777);
  CHECK(parts.manifest.chunks() == 3);
  CHECK(parts.manifest.bytes() == 10);
  CHECK(parts.manifest.xxh3() == XXH3_64bits(file.data(), file.size()));
  REQUIRE(parts.chunks.size() == 3);
  CHECK(chunk_data(parts.chunks[0]) == "abcd");
  CHECK(chunk_data(parts.chunks[1]) == "efgh");
  CHECK(chunk_data(parts.chunks[2]) == "ij");
  std::string joined, error;
  CHECK(join_snapshot(parts.manifest, parts.chunks, &joined, &error));
  CHECK(joined == file);
  CHECK(error.empty());
}

TEST_CASE("a join refuses missing, foreign, misplaced and altered chunks") {
  const SnapshotParts parts = split_snapshot(file_of(10), "h/1/2", 42, 777, 4);
  std::string joined, error;

  std::vector<std::string> missing(parts.chunks.begin(), parts.chunks.end() - 1);
  CHECK_FALSE(join_snapshot(parts.manifest, missing, &joined, &error));
  CHECK(error == "2 chunks, the manifest names 3");

  // Chunk 1 overwritten by another server's snapshot meanwhile.
  std::vector<std::string> foreign = parts.chunks;
  foreign[1] = split_snapshot(file_of(10), "h/9/9", 50, 888, 4).chunks[1];
  CHECK_FALSE(join_snapshot(parts.manifest, foreign, &joined, &error));
  CHECK(error == "chunk 1 belongs to snapshot h/9/9 at 1");

  std::vector<std::string> swapped = parts.chunks;
  std::swap(swapped[0], swapped[1]);
  CHECK_FALSE(join_snapshot(parts.manifest, swapped, &joined, &error));
  CHECK(error == "chunk 0 belongs to snapshot h/1/2 at 1");

  std::vector<std::string> altered = parts.chunks;
  state_pb::SnapshotChunk c;
  REQUIRE(c.ParseFromString(altered[2]));
  c.set_data("iX");
  altered[2] = c.SerializeAsString();
  CHECK_FALSE(join_snapshot(parts.manifest, altered, &joined, &error));
  CHECK(error == "checksum mismatch");

  std::vector<std::string> garbage = parts.chunks;
  garbage[0] = "\xff\xff";
  CHECK_FALSE(join_snapshot(parts.manifest, garbage, &joined, &error));
  CHECK(error == "chunk 0 unparsable");

  state_pb::SnapshotManifest longer = parts.manifest;
  longer.set_bytes(12);
  CHECK_FALSE(join_snapshot(longer, parts.chunks, &joined, &error));
  CHECK(error == "size 10 != 12");
}

TEST_CASE("an empty file is one manifest with no chunks") {
  const SnapshotParts parts = split_snapshot("", "h/1/2", 0, 1);
  CHECK(parts.chunks.empty());
  CHECK(parts.manifest.chunks() == 0);
  std::string joined = "stale", error;
  CHECK(join_snapshot(parts.manifest, {}, &joined, &error));
  CHECK(joined.empty());
}

}  // namespace
}  // namespace ic::replication
