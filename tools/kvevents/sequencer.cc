#include "kvevents/sequencer.hh"

namespace ic::tools::kvevents {

Sequencer::Sequencer(bool replay, std::size_t max_buffered, SequenceHandler& handler,
                     Counters& counters)
    : replay_(replay), max_buffered_(max_buffered), handler_(handler), counters_(counters) {}

void Sequencer::apply_next(std::uint64_t seq, const std::string& payload) {
  last_ = seq;
  handler_.apply(seq, payload);
}

void Sequencer::on_live(std::uint64_t seq, std::string payload) {
  if (replaying_) {
    if (buffered_.size() >= max_buffered_) {
      buffered_.emplace(seq, std::move(payload));
      abandon_replay(Metric::resync_replay_buffer_full);
      return;
    }
    buffered_.emplace(seq, std::move(payload));
    return;
  }
  if (!last_ || seq == *last_ + 1) {
    // The first batch seen from a publisher starts the stream wherever it is: the server side of
    // this replica was cleared when the adapter connected.
    apply_next(seq, payload);
    return;
  }
  if (seq == *last_) {
    counters_.add(Metric::duplicate_batches);
    return;
  }
  if (seq < *last_) {
    // seq went back: the publisher restarted and its blocks are gone.
    handler_.resync(Metric::resync_restart);
    apply_next(seq, payload);
    return;
  }
  counters_.add(Metric::seq_gaps);
  if (!replay_) {
    handler_.resync(Metric::resync_no_replay);
    apply_next(seq, payload);
    return;
  }
  replaying_ = true;
  replay_answered_ = false;
  replay_from_ = *last_ + 1;
  buffered_.emplace(seq, std::move(payload));
  counters_.add(Metric::replays_requested);
  handler_.request_replay(replay_from_);
}

void Sequencer::on_replay(std::uint64_t seq, std::string payload) {
  if (!replaying_) return;  // a late answer to an abandoned replay
  counters_.add(Metric::replayed_batches);
  const bool first = !replay_answered_;
  replay_answered_ = true;
  if (first && seq > replay_from_) {
    // The publisher's buffer no longer holds what we missed.
    handler_.resync(Metric::resync_replay_overrun);
    apply_next(seq, payload);
    return;
  }
  if (seq <= *last_) {
    counters_.add(Metric::duplicate_batches);
    return;
  }
  if (seq != *last_ + 1) {
    handler_.resync(Metric::resync_replay_overrun);
  }
  apply_next(seq, payload);
}

void Sequencer::on_replay_end() {
  if (!replaying_) return;
  replaying_ = false;
  if (!replay_answered_) {
    // Nothing at or after the gap is buffered any more.
    handler_.resync(Metric::resync_replay_overrun);
    last_.reset();
  }
  drain_buffer();
}

void Sequencer::on_replay_timeout() {
  if (!replaying_) return;
  abandon_replay(Metric::resync_replay_timeout);
}

void Sequencer::abandon_replay(Metric reason) {
  replaying_ = false;
  handler_.resync(reason);
  last_.reset();
  drain_buffer();
}

void Sequencer::drain_buffer() {
  auto buffered = std::move(buffered_);
  buffered_.clear();
  for (auto& [seq, payload] : buffered) {
    if (last_ && seq <= *last_) {
      counters_.add(Metric::duplicate_batches);  // already applied from the replay
      continue;
    }
    if (last_ && seq != *last_ + 1) {
      // Still a hole after the replay: do not loop on replays, start over from here.
      handler_.resync(Metric::resync_replay_overrun);
    }
    apply_next(seq, payload);
  }
}

}  // namespace ic::tools::kvevents
