#include "replication/snapshot.hh"

#include <algorithm>

#include "xxhash.h"

namespace ic::replication {

SnapshotParts split_snapshot(std::string_view state_file, const std::string& snapshot_id,
                             std::uint64_t stream_sequence, std::int64_t created_at_us,
                             std::size_t chunk_bytes) {
  chunk_bytes = std::max<std::size_t>(chunk_bytes, 1);
  SnapshotParts parts;
  for (std::size_t at = 0, i = 0; at < state_file.size(); at += chunk_bytes, ++i) {
    state_pb::SnapshotChunk chunk;
    chunk.set_snapshot_id(snapshot_id);
    chunk.set_index(static_cast<std::uint32_t>(i));
    chunk.set_data(std::string(state_file.substr(at, chunk_bytes)));
    parts.chunks.push_back(chunk.SerializeAsString());
  }
  state_pb::SnapshotManifest& m = parts.manifest;
  m.set_snapshot_id(snapshot_id);
  m.set_stream_sequence(stream_sequence);
  m.set_created_at_us(created_at_us);
  m.set_chunks(static_cast<std::uint32_t>(parts.chunks.size()));
  m.set_bytes(state_file.size());
  m.set_xxh3(XXH3_64bits(state_file.data(), state_file.size()));
  return parts;
}

bool join_snapshot(const state_pb::SnapshotManifest& manifest,
                   const std::vector<std::string>& chunks, std::string* state_file,
                   std::string* error) {
  if (chunks.size() != manifest.chunks()) {
    *error = std::to_string(chunks.size()) + " chunks, the manifest names " +
             std::to_string(manifest.chunks());
    return false;
  }
  state_file->clear();
  state_file->reserve(manifest.bytes());
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    state_pb::SnapshotChunk chunk;
    if (!chunk.ParseFromString(chunks[i])) {
      *error = "chunk " + std::to_string(i) + " unparsable";
      return false;
    }
    if (chunk.snapshot_id() != manifest.snapshot_id() || chunk.index() != i) {
      *error = "chunk " + std::to_string(i) + " belongs to snapshot " + chunk.snapshot_id() +
               " at " + std::to_string(chunk.index());
      return false;
    }
    if (state_file->size() + chunk.data().size() > manifest.bytes()) break;
    state_file->append(chunk.data());
  }
  if (state_file->size() != manifest.bytes()) {
    *error =
        "size " + std::to_string(state_file->size()) + " != " + std::to_string(manifest.bytes());
    return false;
  }
  if (XXH3_64bits(state_file->data(), state_file->size()) != manifest.xxh3()) {
    *error = "checksum mismatch";
    return false;
  }
  return true;
}

}  // namespace ic::replication
