#pragma once
// Warm restart (docs/persistence.md): load --state-file into the shards before
// the reactors start, save it every --state-save-interval from a thread of its
// own while they run, and once more after they stopped.
//
// A periodic save never blocks a reactor: the saver thread posts one bounded
// export slice at a time to each core (Runtime::post's control path), the
// core serializes it, and the saver thread does all file I/O. The snapshot is
// fuzzy across slices (an entry ingested behind the cursor waits for the next
// save); the final save after the reactors joined is exact.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "index/shard.hh"
#include "persist/state_file.hh"
#include "persist/stats.hh"
#include "runtime/runtime.hh"

namespace ic::persist {

// Outcome of load_state().
struct LoadOutcome {
  LoadStatus status = LoadStatus::kMissing;
  std::string error;              // why, when status ≠ kOk
  std::int64_t entries = 0;       // (key, replica) entries the index kept (quotas, cap, TTL)
  std::int64_t file_entries = 0;  // (key, replica) entries the file held
  bool interrupted = false;       // LoadOptions::interrupted said stop (status kUnreadable)
  std::string policy_json;        // the saved policy document ("" = defaults)
  std::string templates_json;     // the saved prompt-template document ("" = none)
  std::string server_version;     // version that wrote the file
  std::int64_t created_at_us = 0;
  std::string stream_name;             // replication stream of stream_sequence ("" = none)
  std::uint64_t stream_sequence = 0;   // last stream record the snapshot includes
  std::int64_t stream_created_ns = 0;  // that stream's creation time (identity; 0 = unknown)
};

// The replication stream position a snapshot includes (docs/replication.md
// "Restart"): every record up to `sequence` of `stream` is applied.
struct StreamPosition {
  std::string stream;  // "" without replication
  std::uint64_t sequence = 0;
  std::int64_t created_ns = 0;  // the stream's creation time, its identity (0 = unknown)
};

// How a load reads (docs/persistence.md "Bounds").
struct LoadOptions {
  // A file over this many bytes is refused unread (kUnreadable).
  std::uint64_t max_file_bytes = state_file_limit(1'000'000);
  // Polled before every record read and every applied batch; true stops the
  // load (LoadOutcome::interrupted; the shards may hold part of the file).
  // Empty = never.
  std::function<bool()> interrupted;
  // Serialized chunk bytes parsed and applied per batch: the load's memory
  // beyond the index is one batch's parsed chunks plus one record.
  std::size_t batch_bytes = std::size_t{4} << 20;
};

// Streams PATH twice: the first pass verifies it whole (framing, checksum,
// every chunk parses) without keeping it, the second parses and ingests it a
// batch at a time, one thread per shard. Precondition: no reactor runs yet
// (nothing else touches the shards). Anything but kOk from the first pass
// leaves the shards untouched.
LoadOutcome load_state(const std::string& path, const std::vector<index::Shard*>& shards,
                       std::int64_t now_wall_us, const LoadOptions& options = {});
// The same for the bytes of a state file held in memory (a snapshot fetched
// from JetStream).
LoadOutcome load_state_bytes(std::string_view bytes, const std::vector<index::Shard*>& shards,
                             std::int64_t now_wall_us, const LoadOptions& options = {});

class StateSaver {
 public:
  struct Options {
    std::string path;
    std::int64_t interval_us = 60'000'000;  // between the end of one save and the next
    std::string server_version;
    std::size_t slice_entries = 16384;  // entry slots one core exports per task
    // Read (any thread) just before a save takes its first slice; empty =
    // no replication. Must only name records already applied on every core.
    std::function<StreamPosition()> stream_position;
    // Called on the saver thread after each successful periodic save (PATH
    // holds the new file); empty = nothing. Not called for save_stopped().
    std::function<void()> on_saved;
    // Any thread: the prompt-template document in force (docs/templates.md),
    // read after stream_position; empty function = none saved.
    std::function<std::string()> templates_json;
  };

  // `shards[c]` is core c's shard; all must outlive the saver.
  StateSaver(Options options, runtime::Runtime& runtime, std::vector<index::Shard*> shards,
             PersistStats& stats);
  ~StateSaver();  // stop()s
  StateSaver(const StateSaver&) = delete;
  StateSaver& operator=(const StateSaver&) = delete;

  // Starts the periodic saves (after Runtime::start).
  void start();
  // Stops the thread; a save in progress is abandoned (PATH untouched). Call
  // before Runtime::stop: a slice posted to a stopped core would never run.
  void stop();
  // Writes PATH from the calling thread. Precondition: the reactors joined.
  // Returns "" or why it failed (also counted and logged by the caller).
  std::string save_stopped();

 private:
  struct Slot;
  void run();
  std::string save_live();
  bool wait(const std::shared_ptr<Slot>& slot);
  // Opens the state file for a save started at `started_us`: the header
  // with the policy set and the stream position. nullptr (the save counted
  // as failed) with the reason in `error` when it cannot be created.
  std::unique_ptr<StateFileWriter> open_file(std::int64_t started_us, std::string policy_json,
                                             const StreamPosition& position, std::string* error);
  std::string finish(StateFileWriter& writer, std::int64_t entries, std::int64_t started_us);

  Options options_;
  runtime::Runtime& runtime_;
  std::vector<index::Shard*> shards_;
  PersistStats& stats_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace ic::persist
