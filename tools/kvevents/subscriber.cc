#include "kvevents/subscriber.hh"

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <set>

#include "base/log.hh"
#include "kvevents/decode.hh"
#include "kvevents/sequencer.hh"

namespace ic::tools::kvevents {

using Clock = std::chrono::steady_clock;
using base::LogLevel;

namespace {

// Live SUB sockets may queue this many messages before ZeroMQ drops (and the seq gap shows it).
constexpr int kSubHighWaterMark = 100000;
// Messages read from one socket per poll turn, so one busy rank cannot starve the others.
constexpr int kReadsPerTurn = 1024;
// ZMQ_MAXMSGSIZE of every socket: a frame larger than the largest payload decoded makes
// ZeroMQ drop the connection while reading its size, before anything of that size is
// allocated (docs/kvevents.md "Bounds"); the socket reconnects and the gap is replayed or
// resynced like any other.
constexpr std::int64_t kMaxFrameBytes = static_cast<std::int64_t>(kMaxPayloadBytes);

std::optional<std::uint64_t> seq_of(const zmq::message_t& frame) {
  if (frame.size() != 8) return std::nullopt;
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8; ++i)
    v = (v << 8) | static_cast<const std::uint8_t*>(frame.data())[i];
  return v;
}

std::int64_t steady_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct Subscriber::Zmq {
  zmq::context_t context{1};
};

// One DP rank's publisher: its sockets, its sequence and the replicas its batches named.
class Subscriber::Link final : public SequenceHandler {
 public:
  Link(Subscriber& owner, int rank)
      : owner_(owner),
        rank_(rank),
        sequencer_(!owner.config_.replay_endpoint.empty(), owner.config_.max_buffered_batches,
                   *this, owner.counters_) {
    const AdapterConfig& c = owner.config_;
    endpoint_ = offset_endpoint(c.engine_endpoint, rank);
    open_sub();
    if (!c.replay_endpoint.empty()) open_dealer();
    ranks_.insert(rank);
  }

  // ZeroMQ drops a connection whose frame is over ZMQ_MAXMSGSIZE as a protocol error and,
  // unlike after a network error, never reconnects it: watch the SUB socket's disconnects
  // and open a fresh one, which connects (and retries) like the first.
  void check_connection() {
    zmq::message_t event;
    bool dropped = false;
    while (monitor_->recv(event, zmq::recv_flags::dontwait)) {
      if (event.more()) continue;  // the event frame; the address frame follows
      dropped = true;
    }
    if (!dropped) return;
    base::log(LogLevel::warn,
              "engine connection dropped (a message over 64 MiB, or the engine went away); "
              "reconnecting",
              {{"endpoint", endpoint_}});
    open_sub();
  }

  zmq::socket_t& sub() { return *sub_; }
  zmq::socket_t& monitor() { return *monitor_; }
  zmq::socket_t* dealer() { return dealer_.get(); }

  void read_live() {
    for (int i = 0; i < kReadsPerTurn; ++i) {
      std::vector<zmq::message_t> frames;
      if (!zmq::recv_multipart(*sub_, std::back_inserter(frames), zmq::recv_flags::dontwait))
        return;
      // [topic, seq, payload]; tolerate a publisher that sends no topic frame.
      if (frames.size() == 2) frames.insert(frames.begin(), zmq::message_t());
      const auto seq = frames.size() == 3 ? seq_of(frames[1]) : std::nullopt;
      if (!seq) {
        owner_.counters_.add(Metric::batches_malformed);
        continue;
      }
      sequencer_.on_live(*seq, frames[2].to_string());
    }
  }

  void read_replay() {
    for (int i = 0; dealer_ && i < kReadsPerTurn; ++i) {
      std::vector<zmq::message_t> frames;
      if (!zmq::recv_multipart(*dealer_, std::back_inserter(frames), zmq::recv_flags::dontwait)) {
        return;
      }
      // ["", seq, payload] or, from vLLM 0.26 on, ["", topic, seq, payload].
      if (!frames.empty() && frames.front().size() == 0) frames.erase(frames.begin());
      if (frames.size() == 3) frames.erase(frames.begin());
      const auto seq = frames.size() == 2 ? seq_of(frames[0]) : std::nullopt;
      if (!seq) {
        owner_.counters_.add(Metric::batches_malformed);
        continue;
      }
      replay_deadline_us_ = steady_us() + owner_.config_.replay_timeout_us;
      if (*seq == kReplayEndSeq) {
        sequencer_.on_replay_end();
      } else {
        sequencer_.on_replay(*seq, frames[1].to_string());
      }
    }
  }

  void check_timeout(std::int64_t now_us) {
    if (!sequencer_.replaying() || now_us < replay_deadline_us_) return;
    base::log(LogLevel::warn, "replay timed out; resyncing", {{"endpoint", endpoint_}});
    // A fresh DEALER so a late answer to this replay cannot be taken for the next one.
    open_dealer();
    sequencer_.on_replay_timeout();
  }

  // SequenceHandler
  void apply(std::uint64_t, const std::string& payload) override {
    owner_.counters_.add(Metric::batches_received);
    // Decoded and applied kvevents::kChunkEvents at a time: a batch of a million events costs
    // one chunk of decoded events, not all of them (docs/kvevents.md "Bounds").
    std::string replica;
    bool named = false;  // the replica comes from the first chunk's dp_rank
    const auto now = Clock::now();
    const std::string error = decode_batch_chunks(payload, kChunkEvents, [&](const Batch& chunk) {
      owner_.counters_.add(Metric::events_malformed,
                           static_cast<std::uint64_t>(chunk.malformed_events));
      owner_.counters_.add(Metric::events_unknown,
                           static_cast<std::uint64_t>(chunk.unknown_events));
      if (!named) {
        named = true;
        std::int64_t rank = chunk.dp_rank.value_or(rank_);
        if (rank < 0 || rank >= owner_.config_.dp_size) rank = rank_;
        ranks_.insert(rank);
        replica = replica_name(owner_.config_.replica_id, owner_.config_.dp_size, rank);
      }
      for (const Event& e : chunk.events) owner_.pipeline_.apply(replica, e, now);
    });
    if (error.empty()) return;
    owner_.counters_.add(Metric::batches_malformed);
    if (!malformed_logged_) {
      malformed_logged_ = true;
      base::log(LogLevel::warn, "skipping a malformed event batch (logged once per rank)",
                {{"endpoint", endpoint_}, {"error", error}});
    }
  }

  void request_replay(std::uint64_t first_seq) override {
    std::array<std::uint8_t, 8> be{};
    for (int i = 0; i < 8; ++i) be[i] = static_cast<std::uint8_t>(first_seq >> (56 - 8 * i));
    replay_deadline_us_ = steady_us() + owner_.config_.replay_timeout_us;
    std::array<zmq::const_buffer, 2> frames = {zmq::const_buffer(nullptr, 0), zmq::buffer(be)};
    if (!zmq::send_multipart(*dealer_, frames, zmq::send_flags::dontwait)) {
      replay_deadline_us_ = 0;  // times out at the next turn: resync
    }
    base::log(LogLevel::info, "sequence gap; asking for a replay",
              {{"endpoint", endpoint_}, {"from_seq", std::to_string(first_seq)}});
  }

  void resync(Metric reason) override {
    base::log(LogLevel::warn, "resyncing replica state (ALL_CLEARED)", {{"endpoint", endpoint_}});
    for (std::int64_t r : ranks_) {
      owner_.pipeline_.resync(replica_name(owner_.config_.replica_id, owner_.config_.dp_size, r),
                              reason);
    }
  }

 private:
  void open_sub() {
    const AdapterConfig& c = owner_.config_;
    monitor_.reset();
    sub_ = std::make_unique<zmq::socket_t>(owner_.zmq_->context, zmq::socket_type::sub);
    sub_->set(zmq::sockopt::rcvhwm, kSubHighWaterMark);
    sub_->set(zmq::sockopt::maxmsgsize, kMaxFrameBytes);
    sub_->set(zmq::sockopt::linger, 0);
    sub_->set(zmq::sockopt::subscribe, c.topic);
    const std::string address =
        "inproc://kvevents-monitor-" + std::to_string(rank_) + "-" + std::to_string(++opened_);
    if (zmq_socket_monitor(sub_->handle(), address.c_str(), ZMQ_EVENT_DISCONNECTED) != 0)
      throw zmq::error_t();
    monitor_ = std::make_unique<zmq::socket_t>(owner_.zmq_->context, zmq::socket_type::pair);
    monitor_->set(zmq::sockopt::linger, 0);
    monitor_->connect(address);
    sub_->connect(endpoint_);
  }

  void open_dealer() {
    dealer_ = std::make_unique<zmq::socket_t>(owner_.zmq_->context, zmq::socket_type::dealer);
    dealer_->set(zmq::sockopt::linger, 0);
    dealer_->set(zmq::sockopt::maxmsgsize, kMaxFrameBytes);
    dealer_->connect(offset_endpoint(owner_.config_.replay_endpoint, rank_));
  }

  Subscriber& owner_;
  int rank_;
  std::string endpoint_;
  std::unique_ptr<zmq::socket_t> sub_;
  std::unique_ptr<zmq::socket_t> monitor_;  // PAIR: sub_'s disconnect events
  int opened_ = 0;                          // SUB sockets opened (names the monitor)
  std::unique_ptr<zmq::socket_t> dealer_;
  Sequencer sequencer_;
  std::set<std::int64_t> ranks_;
  std::int64_t replay_deadline_us_ = 0;
  bool malformed_logged_ = false;
};

Subscriber::Subscriber(const AdapterConfig& config, Counters& counters, Sender& sender)
    : config_(config),
      counters_(counters),
      sender_(sender),
      pipeline_(config.identity, config.state, config.window_us, counters, sender,
                config.refresh_us),
      zmq_(std::make_unique<Zmq>()) {
  for (int r = 0; r < config.dp_size; ++r) links_.push_back(std::make_unique<Link>(*this, r));
}

Subscriber::~Subscriber() {
  links_.clear();  // sockets close before the context
}

std::vector<std::string> Subscriber::replica_names() const {
  std::vector<std::string> names;
  for (int r = 0; r < config_.dp_size; ++r) {
    names.push_back(replica_name(config_.replica_id, config_.dp_size, r));
  }
  return names;
}

void Subscriber::run(const std::atomic<bool>& stop) {
  const auto poll_ms = std::chrono::milliseconds(
      std::max<std::int64_t>(1, std::min<std::int64_t>(config_.window_us / 1000, 50)));
  while (!stop.load()) {
    heartbeat_us_ = steady_us();
    if (sender_.take_snapshot_request()) pipeline_.snapshot(replica_names());
    std::vector<zmq::pollitem_t> items;
    for (auto& link : links_) {
      items.push_back({link->sub().handle(), 0, ZMQ_POLLIN, 0});
      items.push_back({link->monitor().handle(), 0, ZMQ_POLLIN, 0});
      if (link->dealer() != nullptr) items.push_back({link->dealer()->handle(), 0, ZMQ_POLLIN, 0});
    }
    try {
      zmq::poll(items, poll_ms);
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;  // a signal (SIGTERM) interrupted the wait
    }
    for (auto& link : links_) {
      link->check_connection();
      link->read_live();
      link->read_replay();
      link->check_timeout(steady_us());
    }
    pipeline_.refresh_due(Clock::now());
    pipeline_.flush_due(Clock::now());
  }
  pipeline_.flush_all();
}

}  // namespace ic::tools::kvevents
