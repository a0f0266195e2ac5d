#include "replication/applier.hh"

#include <thread>

#include "config/log.hh"
#include "config/policy.hh"

namespace ic::replication {
namespace {

namespace pb = ::inferencecache::v1alpha1;
constexpr auto kWaitStep = std::chrono::microseconds(200);

}  // namespace

bool post_to_core(service::ShardedIndex& router, unsigned core, runtime::Task task) {
  return router.cores().try_push(core, task);
}

Applier::Applier(service::ShardedIndex& router, std::int64_t max_in_flight)
    : router_(router),
      max_in_flight_(max_in_flight),
      cores_(router.cores().cores()),
      posted_(new std::atomic<std::uint64_t>[cores_]),
      done_(new std::atomic<std::uint64_t>[cores_]) {
  for (unsigned c = 0; c < cores_; ++c) {
    posted_[c].store(0);
    done_[c].store(0);
  }
}

Applier::~Applier() { drain(std::chrono::seconds(5)); }

void Applier::resume_after(std::uint64_t sequence) { dispatched_.store(sequence); }

bool Applier::apply(std::uint64_t sequence, state_pb::ReplicationRecord&& record,
                    const std::atomic<bool>& stopping) {
  bool ok = true;
  if (record.has_update()) {
    const unsigned owner = router_.owner(record.update().tenant_id());
    auto update = std::make_shared<const pb::CacheStateUpdate>(std::move(*record.mutable_update()));
    ok = post(
        owner, sequence,
        [this, owner, update] {
          const auto result =
              service::wire::ingest(router_.shard(owner), *update, router_.clock().wall_us());
          router_.hand_off_cap(result.cap_handoff);
        },
        stopping);
  } else if (record.has_event()) {
    const unsigned owner = router_.owner(record.event().tenant_id());
    auto event = std::make_shared<const pb::CacheEvent>(std::move(*record.mutable_event()));
    ok = post(
        owner, sequence,
        [this, owner, event] {
          service::wire::apply_event(router_.shard(owner), *event, router_.clock().wall_us());
        },
        stopping);
  } else if (record.has_policy_json()) {
    apply_policy(sequence, record.policy_json(), stopping);
  }
  if (ok) dispatched_.store(sequence, std::memory_order_release);
  return ok;
}

// Every core installs the same parsed set. A document this build rejects is
// logged and skipped: the servers that accepted it run a newer build.
void Applier::apply_policy(std::uint64_t sequence, const std::string& json,
                           const std::atomic<bool>& stopping) {
  config::PolicyParseResult parsed = config::parse_policy_json(json);
  if (!parsed.ok()) {
    config::log(config::LogLevel::warn, "replicated policy rejected: kept the current one",
                {{"stream_sequence", sequence}, {"error", parsed.error}});
    return;
  }
  std::shared_ptr<const config::PolicySet> set = std::move(parsed.set);
  for (unsigned core = 0; core < cores_; ++core) {
    if (!post(
            core, sequence, [this, core, set] { router_.shard(core).set_policies(set); },
            stopping)) {
      return;
    }
  }
}

bool Applier::post(unsigned core, std::uint64_t sequence, runtime::Task task,
                   const std::atomic<bool>& stopping) {
  while (in_flight_.load(std::memory_order_acquire) >= max_in_flight_) {
    if (stopping.load(std::memory_order_relaxed)) return false;
    std::this_thread::sleep_for(kWaitStep);
  }
  in_flight_.fetch_add(1, std::memory_order_acq_rel);
  posted_[core].store(sequence, std::memory_order_release);
  runtime::Task wrapped = [this, core, sequence, inner = std::move(task)]() mutable {
    inner();
    done_[core].store(sequence, std::memory_order_release);
    in_flight_.fetch_sub(1, std::memory_order_acq_rel);
  };
  if (!post_to_core(router_, core, std::move(wrapped))) {
    // Only a stopped runtime refuses a post from this thread.
    in_flight_.fetch_sub(1, std::memory_order_acq_rel);
    return false;
  }
  return true;
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
