#include "kvevents/pipeline.hh"

#include <algorithm>
#include <unordered_set>

#include "fingerprint/fingerprint.hh"

namespace ic::tools::kvevents {

namespace v1 = inferencecache::v1alpha1;

// One replica: its state and the CacheStateUpdate being filled. It is the ChangeSink of its own
// state, so changes land in order.
class Pipeline::Replica final : public ChangeSink {
 public:
  Replica(Pipeline& owner, std::string name)
      : owner_(owner), name_(std::move(name)), state_(owner.options_, owner.counters_) {}

  void add(std::uint64_t prefix, std::int32_t tokens, Tier tier,
           const std::string& adapter) override {
    if (pending_.prefixes_size() == 0) {
      pending_since_ = now_;
      stamp(pending_);
    }
    pending_prefixes_.insert(prefix);
    v1::PrefixEntry* e = pending_.add_prefixes();
    const auto wire = fingerprint::to_wire(prefix);
    e->set_prefix_hash(wire.data(), wire.size());
    e->set_token_count(tokens);
    e->set_tier(static_cast<v1::CacheTier>(static_cast<int>(tier)));
    e->set_adapter_id(adapter);
    if (static_cast<std::size_t>(pending_.prefixes_size()) >= kMaxBatchEntries) flush();
  }

  void evict(std::uint64_t prefix, const std::string& adapter) override {
    // Only an add of this very prefix must reach the server before its eviction; adds of other
    // prefixes keep batching (flushing on every removal made one tiny update per removal).
    if (pending_prefixes_.contains(prefix)) flush();
    v1::CacheEvent event = base_event(v1::CacheEvent::PREFIX_EVICTED);
    const auto wire = fingerprint::to_wire(prefix);
    event.set_prefix_hash(wire.data(), wire.size());
    event.set_adapter_id(adapter);
    owner_.outbox_.push(std::move(event), 1);
  }

  void flush() {
    if (pending_.prefixes_size() == 0) return;
    const std::size_t entries = static_cast<std::size_t>(pending_.prefixes_size());
    owner_.outbox_.push(std::move(pending_), entries);
    pending_ = v1::CacheStateUpdate();
    pending_prefixes_.clear();
  }

  void drop_pending() {
    pending_ = v1::CacheStateUpdate();
    pending_prefixes_.clear();
  }

  void send_all_cleared() { owner_.outbox_.push(base_event(v1::CacheEvent::ALL_CLEARED), 1); }

  bool due(Clock::time_point now) const {
    return pending_.prefixes_size() > 0 && now - pending_since_ >= owner_.window_;
  }

  void set_now(Clock::time_point now) { now_ = now; }

  // One slice of the refresh pass (Pipeline::refresh_due); starts a pass when one is due.
  void refresh_slice(Clock::time_point now, std::chrono::microseconds every) {
    if (refresh_next_ == refresh_todo_.size()) {
      if (refresh_started_ == Clock::time_point{}) refresh_started_ = now;
      if (now - refresh_started_ < every) return;
      refresh_todo_ = state_.engine_hashes();
      refresh_next_ = 0;
      refresh_started_ = now;
    }
    now_ = now;
    const std::size_t end = std::min(refresh_next_ + kRefreshSlice, refresh_todo_.size());
    std::uint64_t sent = 0;
    for (; refresh_next_ < end; ++refresh_next_) {
      if (state_.report(refresh_todo_[refresh_next_], *this)) ++sent;
    }
    owner_.counters_.add(Metric::refreshed_blocks, sent);
    if (refresh_next_ == refresh_todo_.size()) {
      refresh_todo_ = {};  // up to --max-tracked-blocks hashes: give the memory back
      refresh_next_ = 0;
    }
  }
  ReplicaState& state() { return state_; }
  const ReplicaState& state() const { return state_; }

 private:
  void stamp(v1::CacheStateUpdate& u) const {
    u.set_replica_id(name_);
    u.set_model_id(owner_.identity_.model_id);
    u.set_tenant_id(owner_.identity_.tenant_id);
    u.set_hash_scheme(owner_.identity_.hash_scheme);
  }

  v1::CacheEvent base_event(v1::CacheEvent::Type type) const {
    v1::CacheEvent e;
    e.set_type(type);
    e.set_replica_id(name_);
    e.set_model_id(owner_.identity_.model_id);
    e.set_tenant_id(owner_.identity_.tenant_id);
    return e;
  }

  Pipeline& owner_;
  std::string name_;
  ReplicaState state_;
  v1::CacheStateUpdate pending_;
  std::unordered_set<std::uint64_t> pending_prefixes_;  // prefix hashes in pending_
  Clock::time_point pending_since_{};
  Clock::time_point now_{};
  std::vector<std::uint64_t> refresh_todo_;  // engine hashes of the running refresh pass
  std::size_t refresh_next_ = 0;
  Clock::time_point refresh_started_{};  // start of the last pass (first use: no pass yet)
};

Pipeline::Pipeline(Identity identity, StateOptions options, std::int64_t window_us,
                   Counters& counters, Outbox& outbox, std::int64_t refresh_us)
    : identity_(std::move(identity)),
      options_(std::move(options)),
      window_(window_us),
      refresh_(refresh_us),
      counters_(counters),
      outbox_(outbox) {}

Pipeline::~Pipeline() = default;

Pipeline::Replica& Pipeline::replica(const std::string& name) {
  auto& slot = replicas_[name];
  if (!slot) slot = std::make_unique<Replica>(*this, name);
  return *slot;
}

void Pipeline::apply(const std::string& name, const Event& event, Clock::time_point now) {
  Replica& r = replica(name);
  r.set_now(now);
  if (const auto* stored = std::get_if<BlockStored>(&event)) {
    r.state().stored(*stored, r);
    if (r.state().over_capacity()) resync(name, Metric::resync_capacity);
  } else if (const auto* removed = std::get_if<BlockRemoved>(&event)) {
    r.state().removed(*removed, r);
  } else {
    counters_.add(Metric::events_cleared);
    clear(r);
  }
  counters_.set(Metric::tracked_blocks, tracked_blocks());
}

void Pipeline::clear(Replica& r) {
  r.drop_pending();
  r.state().clear();
  r.send_all_cleared();
}

void Pipeline::resync(const std::string& name, Metric reason) {
  counters_.add(reason);
  clear(replica(name));
  counters_.set(Metric::tracked_blocks, tracked_blocks());
}

void Pipeline::flush_due(Clock::time_point now) {
  for (auto& [name, r] : replicas_) {
    if (r->due(now)) r->flush();
  }
}

void Pipeline::refresh_due(Clock::time_point now) {
  if (refresh_.count() <= 0) return;
  for (auto& [name, r] : replicas_) r->refresh_slice(now, refresh_);
}

void Pipeline::flush_all() {
  for (auto& [name, r] : replicas_) r->flush();
}

void Pipeline::snapshot(const std::vector<std::string>& names) {
  for (const auto& name : names) replica(name);
  for (auto& [name, r] : replicas_) {
    r->drop_pending();
    r->send_all_cleared();
    r->state().snapshot(*r);
    r->flush();
  }
  counters_.add(Metric::snapshots_sent);
}

std::size_t Pipeline::tracked_blocks() const {
  std::size_t n = 0;
  for (const auto& [name, r] : replicas_) n += r->state().size();
  return n;
}

}  // namespace ic::tools::kvevents
