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

// One input the tests feed the sequencer: a live batch, a replayed one, the replay's end or its
// timeout.
struct Step {
  enum Kind { live, replayed, end, timeout } kind;
  std::uint64_t seq = 0;
  std::string payload;
};
Step live(std::uint64_t seq, std::string payload) { return {Step::live, seq, std::move(payload)}; }
Step replayed(std::uint64_t seq, std::string payload) {
  return {Step::replayed, seq, std::move(payload)};
}
const Step replay_end{Step::end, 0, ""};
const Step replay_timeout{Step::timeout, 0, ""};

// A sequencer with its handler log and counters, fed steps in order.
struct Harness {
  Log log;
  Counters c;
  Sequencer s;
  Harness(bool replay, std::size_t max_buffered) : s(replay, max_buffered, log, c) {}
  void feed(std::initializer_list<Step> steps) {
    for (const Step& step : steps) {
      switch (step.kind) {
        case Step::live:
          s.on_live(step.seq, step.payload);
          break;
        case Step::replayed:
          s.on_replay(step.seq, step.payload);
          break;
        case Step::end:
          s.on_replay_end();
          break;
        case Step::timeout:
          s.on_replay_timeout();
          break;
      }
    }
  }
};

}  // namespace

TEST_CASE("dropped seq 2 of 0..3 is replayed; the re-sent 3 is applied once, in order") {
  Harness h(true, 100);
  h.feed({live(0, "a"), live(1, "b"), live(3, "d")});
  CHECK(h.s.replaying());
  h.feed({live(4, "e"), replayed(2, "c"), replayed(3, "d"), replayed(4, "e"), replay_end});
  CHECK_FALSE(h.s.replaying());
  h.feed({live(5, "f")});
  CHECK(h.log.lines == Lines{"apply 0 a", "apply 1 b", "replay 2", "apply 2 c", "apply 3 d",
                             "apply 4 e", "apply 5 f"});
  CHECK(h.c.get(Metric::seq_gaps) == 1);
  CHECK(h.c.get(Metric::replays_requested) == 1);
  CHECK(h.c.get(Metric::replayed_batches) == 3);
  CHECK(h.c.get(Metric::duplicate_batches) == 2);  // 3 and 4 arrived live and replayed
}

TEST_CASE("replay overrun: the first replayed seq is later than asked → resync, then go on") {
  Harness h(true, 100);
  h.feed(
      {live(0, "a"), live(5, "f"), replayed(4, "e"), replayed(5, "f"), replay_end, live(6, "g")});
  CHECK(h.log.lines ==
        Lines{"apply 0 a", "replay 1", "resync overrun", "apply 4 e", "apply 5 f", "apply 6 g"});
}

TEST_CASE("replay with nothing buffered at all → resync, then the buffered live batches") {
  Harness h(true, 100);
  h.feed({live(0, "a"), live(2, "c"), replay_end});
  CHECK(h.log.lines == Lines{"apply 0 a", "replay 1", "resync overrun", "apply 2 c"});
}

TEST_CASE("no replay endpoint: a gap resyncs at once") {
  Harness h(false, 100);
  h.feed({live(0, "a"), live(2, "c"), live(3, "d")});
  CHECK(h.log.lines == Lines{"apply 0 a", "resync no_replay", "apply 2 c", "apply 3 d"});
}

TEST_CASE("publisher restart: seq back to 0 resyncs; a repeated seq is a duplicate") {
  Harness h(true, 100);
  h.feed({live(7, "x"), live(8, "y"), live(8, "y"), live(0, "a"), live(1, "b")});
  CHECK(h.log.lines == Lines{"apply 7 x", "apply 8 y", "resync restart", "apply 0 a", "apply 1 b"});
  CHECK(h.c.get(Metric::duplicate_batches) == 1);
}

TEST_CASE("replay timeout and a full buffer abandon the replay with a resync") {
  Harness h(true, 2);
  h.feed({live(0, "a"), live(2, "c"), replay_timeout});
  h.feed({replayed(1, "late")});  // ignored: that replay was abandoned
  h.feed({live(4, "e"), live(5, "f"), live(6, "g"), live(7, "h")});
  CHECK(h.log.lines == Lines{"apply 0 a", "replay 1", "resync timeout", "apply 2 c", "replay 3",
                             "resync buffer_full", "apply 4 e", "apply 5 f", "apply 6 g",
                             "apply 7 h"});
}

}  // namespace ic::tools::kvevents
