#pragma once
// The state file container (docs/persistence.md "File format"): what a warm
// restart reads back. Layout, all integers little-endian:
//
//   "ICSTATE\0"  u32 format_version
//   record*      u8 kind (1 = StateHeader, 2 = StateChunk)  u32 length  bytes
//   trailer      u8 0xFF  u64 XXH3-64 of every byte before the trailer
//
// Exactly one header record, first. Writes go to a fresh temp file beside PATH
// ("PATH.tmp-XXXXXX", created O_EXCL: never an existing file or symlink), are
// fsync'ed and renamed over PATH (then the directory is fsync'ed), so a crash
// leaves either the old file or the new one, never a torn one.

#include <cstddef>
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

// Bounds on what a load reads (docs/persistence.md "Bounds"): a file over
// `max_file_bytes` is refused before its first byte is read; one record (the
// header or a chunk) may hold at most kMaxRecordBytes.
inline constexpr std::uint32_t kMaxRecordBytes = 64u << 20;
// The size limit for an index of `max_entries` (key, replica) entries: 64 MiB
// plus 256 bytes per entry (a saved entry takes about 19, its stats a few
// more), so a file the server wrote always fits.
std::uint64_t state_file_limit(std::uint64_t max_entries);

// A state file read as a stream: the preamble and the header at open, then
// one chunk record at a time, the checksum verified when the trailer is
// reached. Memory: one record at a time (≤ kMaxRecordBytes) plus a 1 MiB read
// buffer, whatever the file's size.
class StateFileReader {
 public:
  // Opens PATH without following a symlink (O_NOFOLLOW) and without blocking
  // on a FIFO (O_NONBLOCK); only a regular file of at most `max_file_bytes` is
  // read: a directory, FIFO, device, socket or symlink is kUnreadable ("not a
  // regular file (directory)"), ENOENT kMissing. Then reads the magic, the
  // version and the header record. Never throws: status() says how it went.
  static std::unique_ptr<StateFileReader> open(const std::string& path,
                                               std::uint64_t max_file_bytes);
  // The same over the bytes of a state file held elsewhere (a snapshot
  // fetched from JetStream); `bytes` must outlive the reader.
  static std::unique_ptr<StateFileReader> over(std::string_view bytes);
  ~StateFileReader();
  StateFileReader(const StateFileReader&) = delete;
  StateFileReader& operator=(const StateFileReader&) = delete;

  // kOk while nothing went wrong (and at a verified end); else why it stopped.
  LoadStatus status() const { return status_; }
  const std::string& error() const { return error_; }  // one line when status() ≠ kOk
  const state_pb::StateHeader& header() const { return header_; }
  // The next chunk record's body into *body. False at the end of the records
  // (status() kOk: the trailer's checksum matched and nothing follows it) or
  // at the first error (status() kTruncated / kCorrupt / kUnreadable).
  bool next_chunk(std::string* body);
  // Back to the first chunk for a second pass over the same bytes (the file's
  // inode stays open: a save renamed over PATH meanwhile is not seen).
  bool rewind();

 private:
  StateFileReader() = default;
  bool fail(LoadStatus status, std::string error);
  bool read_exact(void* dst, std::size_t n, bool hashed = true);
  bool read_preamble();
  bool at_eof();

  int fd_ = -1;
  std::string_view memory_;  // when reading bytes held elsewhere
  std::uint64_t memory_pos_ = 0;
  std::string buffer_;  // file reads, 1 MiB
  std::size_t buffer_pos_ = 0;
  std::size_t buffer_len_ = 0;
  bool have_header_ = false;
  void* hash_state_ = nullptr;  // XXH3_state_t*
  LoadStatus status_ = LoadStatus::kOk;
  std::string error_;
  state_pb::StateHeader header_;
  bool ended_ = false;
};

// A verified file read whole: the header and every chunk still serialized.
// For tests, tools and the snapshot publisher, which hold small files; the
// startup load streams instead (state_saver.hh).
struct StateFileContents {
  LoadStatus status = LoadStatus::kMissing;
  std::string error;  // one line for the log when status ≠ kOk
  state_pb::StateHeader header;
  std::vector<std::string> chunks;  // serialized StateChunks, file order
};

// Reads PATH through StateFileReader (same checks, `max_file_bytes`) and
// keeps every chunk; anything but kOk keeps none.
StateFileContents read_state_file(const std::string& path,
                                  std::uint64_t max_file_bytes = state_file_limit(1'000'000));
// The same checks on the bytes of a state file read elsewhere (a snapshot
// fetched from JetStream, docs/replication.md "Snapshots").
StateFileContents parse_state_bytes(std::string_view bytes);

// The file a corrupt or unreadable state file is kept as
// ("PATH.corrupt-<unix seconds>"), so the next save does not replace it.
std::string kept_aside_path(const std::string& path, std::int64_t unix_seconds);
// Renames PATH (whatever it is: file, directory, FIFO, symlink) to
// kept_aside_path(); "" or the reason it could not.
std::string keep_aside(const std::string& path, std::int64_t unix_seconds);

// The prefix of every temp file a save of PATH creates ("PATH.tmp-").
std::string temp_prefix(const std::string& path);

// Streams a new state file: header first, then chunks, then commit().
class StateFileWriter {
 public:
  // Creates a new temp file "PATH.tmp-XXXXXX" (mkostemp: O_CREAT|O_EXCL, mode
  // 0600, an unpredictable name, so a planted file or symlink is never
  // written through) and writes the preamble and header; nullptr with *error
  // set ("create /x.tmp-XXXXXX: Permission denied").
  static std::unique_ptr<StateFileWriter> create(const std::string& path,
                                                 const state_pb::StateHeader& header,
                                                 std::string* error);
  ~StateFileWriter();  // removes its temp file unless committed
  StateFileWriter(const StateFileWriter&) = delete;
  StateFileWriter& operator=(const StateFileWriter&) = delete;

  // Appends one chunk record (already serialized). False on a write error.
  bool append_chunk(std::string_view serialized_chunk);
  // Writes the trailer, fsyncs, renames over PATH, fsyncs the directory.
  // Returns "" or the reason; after a failure PATH is untouched.
  std::string commit();
  // Bytes written so far.
  std::uint64_t bytes_written() const { return written_; }
  // The temp file's path (tests).
  const std::string& temp_path() const { return tmp_path_; }

 private:
  StateFileWriter(std::string path, std::string tmp_path, std::FILE* file);
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
