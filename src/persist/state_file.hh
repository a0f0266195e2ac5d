#pragma once
// The state file container (docs/persistence.md "File format"): what a warm
// restart reads back. Layout, all integers little-endian:
//
//   "ICSTATE\0"  u32 format_version
//   record*      u8 kind (1 = StateHeader, 2 = StateChunk)  u32 length  bytes
//   trailer      u8 0xFF  u64 XXH3-64 of every byte before the trailer
//
// Exactly one header record, first. Writes go to PATH.tmp, are fsync'ed and
// renamed over PATH (then the directory is fsync'ed), so a crash leaves either
// the old file or the new one, never a torn one.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "inferencecache/state/v1/state.pb.h"

namespace ic::persist {

namespace state_pb = ::inferencecache::state::v1;

// Bumped whenever the layout or the meaning of a record changes; a file of any
// other version starts the server cold (LoadStatus::kWrongVersion). 2: the
// header names the replication stream position the snapshot includes
// (docs/persistence.md "Versions"); a version-1 file has none, so a replica
// could not know where to resume the stream and is refused.
inline constexpr std::uint32_t kStateFormatVersion = 2;

// Why a load did (not) yield a state. Everything but kOk means a cold start.
enum class LoadStatus : std::uint8_t {
  kOk,
  kMissing,       // no file at PATH (first start)
  kUnreadable,    // open/read error other than ENOENT
  kWrongVersion,  // magic ok, another format version (e.g. an older build's)
  kTruncated,     // ends before its trailer or inside a record
  kCorrupt,       // bad magic, checksum mismatch, unparsable record, no header
};
// Metric label / log value: "ok", "missing", "unreadable", "wrong_version",
// "truncated", "corrupt".
std::string_view load_status_name(LoadStatus status);

// A verified file: the header and the chunks still serialized (the loader
// parses them one at a time).
struct StateFileContents {
  LoadStatus status = LoadStatus::kMissing;
  std::string error;  // one line for the log when status ≠ kOk
  state_pb::StateHeader header;
  std::vector<std::string_view> chunks;  // views into `bytes`
  std::string bytes;                     // the whole file
};

// Reads PATH whole and verifies magic, version, record framing and checksum
// before parsing the header. Never throws; a bad file gives its status.
StateFileContents read_state_file(const std::string& path);
// The same checks on the bytes of a state file read elsewhere (a snapshot
// fetched from JetStream, docs/replication.md "Snapshots").
StateFileContents parse_state_bytes(std::string bytes);

// Streams a new state file: header first, then chunks, then commit().
class StateFileWriter {
 public:
  // Creates PATH.tmp (truncating a leftover one) and writes the preamble and
  // header; nullptr with *error set ("open /x.tmp: Permission denied").
  static std::unique_ptr<StateFileWriter> create(const std::string& path,
                                                 const state_pb::StateHeader& header,
                                                 std::string* error);
  ~StateFileWriter();  // removes PATH.tmp unless committed
  StateFileWriter(const StateFileWriter&) = delete;
  StateFileWriter& operator=(const StateFileWriter&) = delete;

  // Appends one chunk record (already serialized). False on a write error.
  bool append_chunk(std::string_view serialized_chunk);
  // Writes the trailer, fsyncs, renames over PATH, fsyncs the directory.
  // Returns "" or the reason; after a failure PATH is untouched.
  std::string commit();
  // Bytes written so far.
  std::uint64_t bytes_written() const { return written_; }

 private:
  StateFileWriter(std::string path, std::FILE* file);
  bool put(const void* data, std::size_t n);
  bool put_record(std::uint8_t kind, std::string_view bytes);

  std::string path_;
  std::string tmp_path_;
  std::FILE* file_;
  void* hash_state_;  // XXH3_state_t*
  std::uint64_t written_ = 0;
  bool failed_ = false;
  bool committed_ = false;
  std::string error_;
};

}  // namespace ic::persist
