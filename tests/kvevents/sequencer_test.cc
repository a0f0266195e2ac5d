// Sequencer: strict seq order, replay on gaps, resyncs (docs/kvevents.md "Sequence gaps, replay and
// resync").
#include "kvevents/sequencer.hh"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace ic::tools::kvevents {
namespace {

struct Log final : SequenceHandler {
  std::vector<std::string> lines;
  void apply(std::uint64_t seq, const std::string& payload) override {
    lines.push_back("apply " + std::to_string(seq) + " " + payload);
  }
  void request_replay(std::uint64_t first) override {
    lines.push_back("replay " + std::to_string(first));
  }
  void resync(Metric reason) override {
    lines.push_back(reason == Metric::resync_restart          ? "resync restart"
                    : reason == Metric::resync_no_replay      ? "resync no_replay"
                    : reason == Metric::resync_replay_overrun ? "resync overrun"
                    : reason == Metric::resync_replay_timeout ? "resync timeout"
                                                              : "resync buffer_full");
  }
};

using Lines = std::vector<std::string>;

}  // namespace

TEST_CASE("dropped seq 2 of 0..3 is replayed; the re-sent 3 is applied once, in order") {
  Log log;
  Counters c;
  Sequencer s(true, 100, log, c);
  s.on_live(0, "a");
  s.on_live(1, "b");
  s.on_live(3, "d");
  CHECK(s.replaying());
  s.on_live(4, "e");
  s.on_replay(2, "c");
  s.on_replay(3, "d");
  s.on_replay(4, "e");
  s.on_replay_end();
  CHECK_FALSE(s.replaying());
  s.on_live(5, "f");
  CHECK(log.lines == Lines{"apply 0 a", "apply 1 b", "replay 2", "apply 2 c", "apply 3 d",
                           "apply 4 e", "apply 5 f"});
  CHECK(c.get(Metric::seq_gaps) == 1);
  CHECK(c.get(Metric::replays_requested) == 1);
  CHECK(c.get(Metric::replayed_batches) == 3);
  CHECK(c.get(Metric::duplicate_batches) == 2);  // 3 and 4 arrived live and replayed
}

TEST_CASE("replay overrun: the first replayed seq is later than asked → resync, then go on") {
  Log log;
  Counters c;
  Sequencer s(true, 100, log, c);
  s.on_live(0, "a");
  s.on_live(5, "f");
  s.on_replay(4, "e");
  s.on_replay(5, "f");
  s.on_replay_end();
  s.on_live(6, "g");
  CHECK(log.lines ==
        Lines{"apply 0 a", "replay 1", "resync overrun", "apply 4 e", "apply 5 f", "apply 6 g"});
}

TEST_CASE("replay with nothing buffered at all → resync, then the buffered live batches") {
  Log log;
  Counters c;
  Sequencer s(true, 100, log, c);
  s.on_live(0, "a");
  s.on_live(2, "c");
  s.on_replay_end();
  CHECK(log.lines == Lines{"apply 0 a", "replay 1", "resync overrun", "apply 2 c"});
}

TEST_CASE("no replay endpoint: a gap resyncs at once") {
  Log log;
  Counters c;
  Sequencer s(false, 100, log, c);
  s.on_live(0, "a");
  s.on_live(2, "c");
  s.on_live(3, "d");
  CHECK(log.lines == Lines{"apply 0 a", "resync no_replay", "apply 2 c", "apply 3 d"});
}

TEST_CASE("publisher restart: seq back to 0 resyncs; a repeated seq is a duplicate") {
  Log log;
  Counters c;
  Sequencer s(true, 100, log, c);
  s.on_live(7, "x");
  s.on_live(8, "y");
  s.on_live(8, "y");
  s.on_live(0, "a");
  s.on_live(1, "b");
  CHECK(log.lines == Lines{"apply 7 x", "apply 8 y", "resync restart", "apply 0 a", "apply 1 b"});
  CHECK(c.get(Metric::duplicate_batches) == 1);
}

TEST_CASE("replay timeout and a full buffer abandon the replay with a resync") {
  Log log;
  Counters c;
  Sequencer s(true, 2, log, c);
  s.on_live(0, "a");
  s.on_live(2, "c");
  s.on_replay_timeout();
  s.on_replay(1, "late");  // ignored: that replay was abandoned
  s.on_live(4, "e");
  s.on_live(5, "f");
  s.on_live(6, "g");
  s.on_live(7, "h");
  CHECK(log.lines == Lines{"apply 0 a", "replay 1", "resync timeout", "apply 2 c", "replay 3",
                           "resync buffer_full", "apply 4 e", "apply 5 f", "apply 6 g",
                           "apply 7 h"});
}

}  // namespace ic::tools::kvevents
