#include "replication/applier.hh"

#include <mimalloc.h>

#include <thread>

#include "base/log.hh"
#include "config/policy.hh"

namespace ic::replication {
namespace {

namespace pb = ::inferencecache::v1alpha1;
constexpr auto kWaitStep = std::chrono::microseconds(200);

}  // namespace

bool post_to_core(sharding::ShardedIndex& router, unsigned core, runtime::Task task) {
  return router.cores().try_push(core, task);
}

Applier::Applier(sharding::ShardedIndex& router, std::string origin, std::int64_t max_in_flight,
                 std::int64_t slice_us)
    : router_(router),
      origin_(std::move(origin)),
      max_in_flight_(max_in_flight),
      slice_(slice_us),
      cores_(router.cores().cores()),
      pending_(cores_),
      posted_(new std::atomic<std::uint64_t>[cores_]),
      done_(new std::atomic<std::uint64_t>[cores_]),
      core_state_(cores_) {
  for (unsigned c = 0; c < cores_; ++c) {
    posted_[c].store(0);
    done_[c].store(0);
  }
}

Applier::~Applier() { drain(std::chrono::seconds(5)); }

void Applier::resume_after(std::uint64_t sequence) {
  added_.store(sequence);
  dispatched_.store(sequence);
}

void Applier::skip(std::uint64_t sequence) {
  added_.store(sequence, std::memory_order_release);
  if (queued_ == 0) dispatched_.store(sequence, std::memory_order_release);
}

void Applier::queue(unsigned core, std::uint64_t sequence, Item&& item) {
  Batch& b = pending_[core];
  b.ops.push_back(std::move(item));
  b.last = sequence;
  ++queued_;
}

void Applier::add(std::uint64_t sequence, state_pb::ReplicationRecord&& record) {
  const std::uint64_t own = record.origin() == origin_ ? record.origin_sequence() : 0;
  if (record.has_update()) {
    const unsigned core = router_.owner(record.update().tenant_id());
    queue(core, sequence, Item{std::move(*record.mutable_update()), own});
  } else if (record.has_event()) {
    const unsigned core = router_.owner(record.event().tenant_id());
    queue(core, sequence, Item{std::move(*record.mutable_event()), own});
  } else if (record.has_policy_json()) {
    add_policy(sequence, record.policy_json());
  }
  added_.store(sequence, std::memory_order_release);
}

void Applier::add(std::uint64_t sequence, OwnChange&& change) {
  const unsigned core = router_.owner(change.tenant_id);
  const std::uint64_t own = change.sequence;
  queue(core, sequence, Item{std::move(change), own});
  added_.store(sequence, std::memory_order_release);
}

// Every core installs the same parsed set. A document this build rejects is
// logged and skipped: the servers that accepted it run a newer build.
void Applier::add_policy(std::uint64_t sequence, const std::string& json) {
  config::PolicyParseResult parsed = config::parse_policy_json(json);
  if (!parsed.ok()) {
    base::log(base::LogLevel::warn, "replicated policy rejected: kept the current one",
              {{"stream_sequence", sequence}, {"error", parsed.error}});
    return;
  }
  std::shared_ptr<const config::PolicySet> set = std::move(parsed.set);
  base::log(base::LogLevel::info, "policy accepted",
            {{"source", "replication"},
             {"stream_sequence", sequence},
             {"policies", set->policy_count()},
             {"quotas", set->quota_count()}});
  for (Batch& b : pending_) {
    b.ops.push_back(Item{set});
    b.last = sequence;
  }
  ++queued_;
}

// On the owner core. The batch waits behind any earlier one still part-run:
// running it here would overtake that rest, which a reactor turn reaches only
// after its mailboxes. One drain per core per turn, at the end of the turn.
void Applier::enqueue(unsigned core, Batch&& batch) {
  CoreState& state = core_state_[core];
  state.batches.push_back(std::move(batch));
  if (state.drain_scheduled) return;
  state.drain_scheduled = true;
  router_.cores().defer(runtime::Task([this, core] { drain(core); }));
}

void Applier::drain(unsigned core) {
  CoreState& state = core_state_[core];
  const auto until = std::chrono::steady_clock::now() + slice_;
  while (!state.batches.empty()) {
    Batch& batch = state.batches.front();
    if (!run(core, batch, until)) {
      // The rest in the next turn: the core's I/O and timers run in between.
      router_.cores().defer(runtime::Task([this, core] { drain(core); }));
      return;
    }
    const auto n = static_cast<std::int64_t>(batch.ops.size());
    done_[core].store(batch.last, std::memory_order_release);
    state.batches.pop_front();
    in_flight_.fetch_sub(n, std::memory_order_acq_rel);
    if (std::chrono::steady_clock::now() >= until && !state.batches.empty()) {
      router_.cores().defer(runtime::Task([this, core] { drain(core); }));
      return;
    }
  }
  state.drain_scheduled = false;
}

// The batch's records in stream order, each through the core's echo filter,
// until `until` (at least one). A record is freed once run (its parsed
// message is the bulk of the batch's memory).
bool Applier::run(unsigned core, Batch& batch, std::chrono::steady_clock::time_point until) {
  std::uint64_t skipped = 0;
  bool first = true;
  for (; batch.next < batch.ops.size(); ++batch.next) {
    if (!first && std::chrono::steady_clock::now() >= until) break;
    first = false;
    Item& item = batch.ops[batch.next];
    if (passes(core, item)) {
      apply(core, item);
    } else {
      ++skipped;
    }
    item = Item{};
  }
  if (skipped > 0) echoes_skipped_.fetch_add(skipped, std::memory_order_relaxed);
  return batch.next == batch.ops.size();
}

void Applier::apply(unsigned core, Item& item) {
  if (auto* own = std::get_if<OwnChange>(&item.op)) {
    // An echo applied again: parsed now (this build wrote it; a failure
    // would be a corrupted stream, and the record is passed over).
    if (own->event) {
      pb::CacheEvent event;
      if (!event.ParseFromString(own->bytes)) return;
      item.op = std::move(event);
    } else {
      pb::CacheStateUpdate update;
      if (!update.ParseFromString(own->bytes)) return;
      item.op = std::move(update);
    }
  }
  const std::int64_t now = router_.clock().wall_us();
  if (auto* update = std::get_if<pb::CacheStateUpdate>(&item.op)) {
    // Through the router: a placement's copies follow (docs/placement.md).
    router_.hand_off_cap(router_.apply_ingest(core, *update, now).cap_handoff);
  } else if (auto* event = std::get_if<pb::CacheEvent>(&item.op)) {
    router_.apply_event_now(core, *event, now);
  } else {
    router_.set_policies(core, std::get<std::shared_ptr<const config::PolicySet>>(item.op));
  }
}

bool Applier::passes(unsigned core, const Item& item) {
  EchoFilter& filter = core_state_[core].filter;
  if (const auto* update = std::get_if<pb::CacheStateUpdate>(&item.op)) {
    return filter.stream_record(update->tenant_id(), item.own_sequence);
  }
  if (const auto* event = std::get_if<pb::CacheEvent>(&item.op)) {
    return filter.stream_record(event->tenant_id(), item.own_sequence);
  }
  if (const auto* own = std::get_if<OwnChange>(&item.op)) {
    return filter.stream_record(own->tenant_id, item.own_sequence);
  }
  filter.stream_all();
  return true;
}

bool Applier::flush(const std::atomic<bool>& stopping) {
  for (unsigned core = 0; core < cores_; ++core) {
    Batch& b = pending_[core];
    if (b.ops.empty()) continue;
    while (in_flight_.load(std::memory_order_acquire) >= max_in_flight_) {
      if (stopping.load(std::memory_order_relaxed)) {
        for (Batch& rest : pending_) rest.ops.clear();
        queued_ = 0;
        return false;
      }
      std::this_thread::sleep_for(kWaitStep);
    }
    const auto n = static_cast<std::int64_t>(b.ops.size());
    in_flight_.fetch_add(n, std::memory_order_acq_rel);
    posted_[core].store(b.last, std::memory_order_release);
    runtime::Task task = [this, core, batch = std::move(b)]() mutable {
      enqueue(core, std::move(batch));
    };
    b = Batch{};
    // Only a stopped runtime refuses a post from this thread.
    if (!post_to_core(router_, core, std::move(task))) {
      in_flight_.fetch_sub(n, std::memory_order_acq_rel);
    }
  }
  queued_ = 0;
  dispatched_.store(added_.load(std::memory_order_acquire), std::memory_order_release);
  return true;
}

void Applier::collect_on_cores() {
  for (unsigned core = 0; core < cores_; ++core) {
    post_to_core(router_, core, runtime::Task([] { mi_collect(true); }));
  }
}

std::uint64_t Applier::applied_through() const {
  // Dispatched first: every record up to it was posted before it was stored.
  std::uint64_t through = dispatched_.load(std::memory_order_acquire);
  for (unsigned c = 0; c < cores_; ++c) {
    const std::uint64_t posted = posted_[c].load(std::memory_order_acquire);
    const std::uint64_t done = done_[c].load(std::memory_order_acquire);
    if (done != posted && done < through) through = done;
  }
  return through;
}

bool Applier::drain(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (in_flight_.load(std::memory_order_acquire) > 0) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(kWaitStep);
  }
  return true;
}

}  // namespace ic::replication
