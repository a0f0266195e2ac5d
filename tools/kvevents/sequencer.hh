// Sequence tracking for one publisher (docs/kvevents.md "Sequence gaps, replay and resync"):
// applies batches strictly in seq order, asks the replay socket for what a gap lost, buffers live
// batches meanwhile, and falls back to a resync (drop the replica's state, ALL_CLEARED) when replay
// cannot close the gap. Socket-free so the tests drive every path; the subscriber owns the sockets
// and timers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "kvevents/counters.hh"

namespace ic::tools::kvevents {

// What the sequencer asks of its owner.
class SequenceHandler {
 public:
  virtual ~SequenceHandler() = default;
  // Decode and apply the batch `seq` (called strictly in increasing seq order).
  virtual void apply(std::uint64_t seq, const std::string& payload) = 0;
  // Send a replay request for every batch from `first_seq` on.
  virtual void request_replay(std::uint64_t first_seq) = 0;
  // Drop this publisher's replicas (ALL_CLEARED) and count `reason`.
  virtual void resync(Metric reason) = 0;
};

// The replay reply that ends a replay: seq 0xFFFFFFFFFFFFFFFF with an empty payload.
inline constexpr std::uint64_t kReplayEndSeq = ~0ull;

class Sequencer {
 public:
  // `replay`: a replay endpoint exists. `max_buffered`: live batches held while a replay runs;
  // past it the replay is abandoned with a resync (bounded memory).
  Sequencer(bool replay, std::size_t max_buffered, SequenceHandler& handler, Counters& counters);

  void on_live(std::uint64_t seq, std::string payload);
  void on_replay(std::uint64_t seq, std::string payload);
  // The end marker arrived.
  void on_replay_end();
  // No reply in time: give up on the replay and resync.
  void on_replay_timeout();

  bool replaying() const { return replaying_; }
  std::optional<std::uint64_t> last_applied() const { return last_; }

 private:
  void apply_next(std::uint64_t seq, const std::string& payload);
  void abandon_replay(Metric reason);
  void drain_buffer();

  bool replay_;
  std::size_t max_buffered_;
  SequenceHandler& handler_;
  Counters& counters_;
  std::optional<std::uint64_t> last_;
  bool replaying_ = false;
  bool replay_answered_ = false;
  std::uint64_t replay_from_ = 0;
  std::map<std::uint64_t, std::string> buffered_;
};

}  // namespace ic::tools::kvevents
