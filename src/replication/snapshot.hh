#pragma once
// Index snapshots published through JetStream (docs/replication.md
// "Snapshots"): a state file (docs/persistence.md "File format") split into
// chunk messages plus a manifest naming the snapshot, its size, its XXH3-64
// and the changes-stream sequence it covers. Pure codec: the NATS side is in
// state_store.cc.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "inferencecache/state/v1/state.pb.h"

namespace ic::replication {

namespace state_pb = ::inferencecache::state::v1;

// Data bytes per chunk message: well under NATS's default 1 MiB max_payload.
inline constexpr std::size_t kSnapshotChunkBytes = std::size_t{512} << 10;

// A snapshot ready to publish: serialized SnapshotChunk bodies, in order.
struct SnapshotParts {
  state_pb::SnapshotManifest manifest;
  std::vector<std::string> chunks;
};

// Splits `state_file` (the bytes of a committed state file) into chunks of at
// most `chunk_bytes` data bytes (≥ 1).
SnapshotParts split_snapshot(std::string_view state_file, const std::string& snapshot_id,
                             std::uint64_t stream_sequence, std::int64_t created_at_us,
                             std::size_t chunk_bytes = kSnapshotChunkBytes);

// Joins chunk bodies (`chunks[i]` = the body of chunk i) into the state file
// the manifest describes. False with *error ("chunk 3 belongs to snapshot
// x/1", "size 10 != 12", "checksum mismatch", ...) when a chunk is missing,
// unparsable, of another snapshot, out of place, or the sum differs.
bool join_snapshot(const state_pb::SnapshotManifest& manifest,
                   const std::vector<std::string>& chunks, std::string* state_file,
                   std::string* error);

}  // namespace ic::replication
