// Read copies of spread tenants (placement/spread.hh, docs/placement.md):
// the owner's side (queue, batch, retry, resync) and the copy's side (apply).

#include "placement/spread.hh"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "base/log.hh"
#include "index/partition.hh"
#include "metrics/registry.hh"
#include "placement/copy_export.hh"
#include "sharding/index_wire.hh"

namespace ic::placement {

// One forwarded change: an input the owner applied, one of its removals, or
// a resync (the owner's export of the tenant, loaded into a fresh copy).
struct SpreadPlacement::Change {
  std::shared_ptr<const pb::CacheStateUpdate> update;
  std::shared_ptr<const pb::CacheEvent> event;
  std::shared_ptr<const std::vector<std::string>> reset;  // serialized state chunks
  std::int64_t wall_us = 0;                               // the owner's clock when applied
  std::uint32_t generation = 0;                           // of a reset
  std::size_t bytes = 0;  // what it holds, for SpreadOptions::max_queued_bytes

  static Change of(std::shared_ptr<const pb::CacheStateUpdate> update,
                   std::shared_ptr<const pb::CacheEvent> event, std::int64_t wall_us) {
    Change change;
    change.update = std::move(update);
    change.event = std::move(event);
    change.wall_us = wall_us;
    change.bytes = sizeof(Change) + (change.update ? change.update->ByteSizeLong() : 0) +
                   (change.event ? change.event->ByteSizeLong() : 0);
    return change;
  }
};

struct SpreadPlacement::Batch {
  std::vector<Change> changes;
};

struct SpreadPlacement::Tenant {
  struct Link {
    std::deque<Change> queued;     // owner core only, oldest first
    std::size_t queued_bytes = 0;  // owner core only: Change::bytes of `queued`
    bool retry_armed = false;      // owner core only
    // The generation the copy must have loaded to answer (bumped by a resync).
    std::atomic<std::uint32_t> wanted{0};
  };
  struct Copy {
    std::unique_ptr<index::Shard> shard;  // copy core only
    std::atomic<std::uint32_t> applied{0};
  };
  std::string id;
  unsigned owner = 0;
  std::vector<unsigned> cores;                // owner first
  std::vector<std::unique_ptr<Link>> links;   // by core; null off the copy cores
  std::vector<std::unique_ptr<Copy>> copies;  // by core; null off the copy cores
  bool in_apply = false;                      // owner: between before_apply and its hook
  std::vector<Change> removals_in_apply;      // owner: removals of the input being applied
};

struct SpreadPlacement::CoreState {
  std::unique_ptr<OwnerSink> sink;  // on cores owning a spread tenant
  bool flush_scheduled = false;
  std::shared_ptr<const config::PolicySet> copy_policies;
  std::vector<Tenant*> owned;  // spread tenants this core owns
  std::unordered_map<std::string, Tenant*, config::StringHash, std::equal_to<>> by_id;
};

// The owner shard's ChangeSink: sees its removals, passes every change on
// to the StreamCacheEvents hub installed behind it.
class SpreadPlacement::OwnerSink final : public index::ChangeSink {
 public:
  OwnerSink(SpreadPlacement& placement, unsigned core) : placement_(placement), core_(core) {}
  void on_change(const index::Change& change) override {
    if (downstream != nullptr) downstream->on_change(change);
    if (change.type == index::ChangeType::kPrefixEvicted) placement_.on_owner_change(core_, change);
  }
  index::ChangeSink* downstream = nullptr;

 private:
  SpreadPlacement& placement_;
  unsigned core_;
};

std::shared_ptr<const config::PolicySet> without_quotas(const config::PolicySet& set) {
  return std::make_shared<const config::PolicySet>(
      std::unordered_map<std::string, config::CachePolicy, config::StringHash, std::equal_to<>>(
          set.policies().begin(), set.policies().end()),
      std::unordered_map<std::string, config::TenantQuota, config::StringHash, std::equal_to<>>{},
      std::string(), set.pd_topologies());
}

SpreadPlacement::SpreadPlacement(runtime::Cores& cores, std::vector<index::Shard*> owners,
                                 index::IndexConfig config, index::IndexGlobals* globals,
                                 std::shared_ptr<const config::PolicySet> policies,
                                 SpreadOptions options)
    : cores_(cores),
      owners_(std::move(owners)),
      copy_config_(config),
      globals_(globals),
      options_(std::move(options)) {
  // A copy's cap is unreachable: only the owner decides cap evictions.
  copy_config_.max_entries = INT64_MAX / 4;
  const auto n = static_cast<unsigned>(owners_.size());
  const auto copy_policies = without_quotas(policies ? *policies : *config::PolicySet::defaults());
  for (unsigned c = 0; c < n; ++c) {
    per_core_.push_back(std::make_unique<CoreState>());
    per_core_.back()->copy_policies = copy_policies;
  }
  const unsigned k = options_.cores_per_tenant == 0 ? n : std::min(options_.cores_per_tenant, n);
  for (const std::string& id : options_.tenants) {
    if (id.empty() || id == config::kReservedTenant || find(id) != nullptr) continue;
    auto t = std::make_unique<Tenant>();
    t->id = id;
    t->owner = index::owner_core(id, n);
    t->links.resize(n);
    t->copies.resize(n);
    for (unsigned i = 0; i < k; ++i) {
      const unsigned core = (t->owner + i) % n;
      t->cores.push_back(core);
      if (i == 0) continue;
      t->links[core] = std::make_unique<Tenant::Link>();
      t->copies[core] = std::make_unique<Tenant::Copy>();
      t->copies[core]->shard = new_copy(core);
    }
    for (unsigned c = 0; c < n; ++c) per_core_[c]->by_id.emplace(id, t.get());
    per_core_[t->owner]->owned.push_back(t.get());
    tenants_.push_back(std::move(t));
  }
  for (unsigned c = 0; c < n; ++c) {
    if (per_core_[c]->owned.empty()) continue;
    per_core_[c]->sink = std::make_unique<OwnerSink>(*this, c);
    owners_[c]->set_change_sink(per_core_[c]->sink.get());
  }
}

SpreadPlacement::~SpreadPlacement() {
  for (unsigned c = 0; c < owners_.size(); ++c) {
    if (per_core_[c]->sink) owners_[c]->set_change_sink(per_core_[c]->sink->downstream);
  }
}

std::unique_ptr<index::Shard> SpreadPlacement::new_copy(unsigned core) const {
  return std::make_unique<index::Shard>(copy_config_, globals_, per_core_[core]->copy_policies);
}

SpreadPlacement::Tenant* SpreadPlacement::find(std::string_view tenant) const {
  if (per_core_.empty()) return nullptr;
  // Every core holds the same map; this one is read-only after construction.
  const auto& by_id = per_core_[0]->by_id;
  const auto it = by_id.find(tenant);
  return it == by_id.end() ? nullptr : it->second;
}

void SpreadPlacement::seed_copies() {
  for (const auto& t : tenants_) {
    const std::vector<std::string> chunks = export_tenant(*owners_[t->owner], t->id);
    for (unsigned core : t->cores) {
      if (core == t->owner) continue;
      t->copies[core]->shard = new_copy(core);
      load_chunks(*t->copies[core]->shard, chunks);
    }
  }
}

std::vector<unsigned> SpreadPlacement::cores_of(std::string_view tenant) const {
  const Tenant* t = find(tenant);
  return t == nullptr ? std::vector<unsigned>{} : t->cores;
}

const index::Shard* SpreadPlacement::copy(unsigned core, std::string_view tenant) const {
  const Tenant* t = find(tenant);
  if (t == nullptr || !t->copies[core]) return nullptr;
  return t->copies[core]->shard.get();
}

// ------------------------------------------------------------------ lookups

index::Shard* SpreadPlacement::copy_for(unsigned core, std::string_view tenant) {
  const auto& by_id = per_core_[core]->by_id;
  const auto it = by_id.find(tenant);
  if (it == by_id.end()) return nullptr;
  Tenant& t = *it->second;
  if (!t.copies[core]) return nullptr;
  // A copy whose changes were replaced by a resync answers again once loaded.
  const std::uint32_t wanted = t.links[core]->wanted.load(std::memory_order_acquire);
  if (t.copies[core]->applied.load(std::memory_order_acquire) != wanted) return nullptr;
  return t.copies[core]->shard.get();
}

// ---------------------------------------------------------- the owner's side

// Changes are forwarded only from the owner's own reactor: one applied off
// the reactors (a state file or snapshot load before the start) is in the
// owner's state that seed_copies() exports. The spread tenant `tenant` when
// `core` is its owner and this is that core's reactor, else nullptr.
SpreadPlacement::Tenant* SpreadPlacement::owned_here(unsigned core, std::string_view tenant) const {
  if (cores_.current_core() != core) return nullptr;
  Tenant* t = find(tenant);
  return t != nullptr && t->owner == core ? t : nullptr;
}

void SpreadPlacement::before_apply(unsigned core, std::string_view tenant) {
  if (Tenant* t = owned_here(core, tenant)) t->in_apply = true;
}

// The input the owner just applied, then the removals it caused, in that order.
void SpreadPlacement::forward_input(Tenant& t, unsigned owner, Change input) {
  t.in_apply = false;
  enqueue(t, std::move(input));
  for (Change& removal : t.removals_in_apply) enqueue(t, std::move(removal));
  t.removals_in_apply.clear();
  schedule_flush(owner);
}

void SpreadPlacement::applied(unsigned core, const pb::CacheStateUpdate& update,
                              std::int64_t now_wall_us) {
  Tenant* t = owned_here(core, update.tenant_id());
  if (t == nullptr) return;
  forward_input(
      *t, core,
      Change::of(std::make_shared<const pb::CacheStateUpdate>(update), nullptr, now_wall_us));
}

void SpreadPlacement::applied(unsigned core, const pb::CacheEvent& event,
                              std::int64_t now_wall_us) {
  Tenant* t = owned_here(core, event.tenant_id());
  if (t == nullptr) return;
  forward_input(*t, core,
                Change::of(nullptr, std::make_shared<const pb::CacheEvent>(event), now_wall_us));
}

// A removal the owner decided (TTL, cap, quota) or applied (an event): a
// PREFIX_EVICTED of that (key's hash, adapter, replica) on every copy.
void SpreadPlacement::on_owner_change(unsigned owner, const index::Change& change) {
  Tenant* t = owned_here(owner, change.tenant_id);
  if (t == nullptr) return;
  auto event = std::make_shared<pb::CacheEvent>();
  event->set_type(pb::CacheEvent::PREFIX_EVICTED);
  event->set_tenant_id(std::string(change.tenant_id));
  event->set_model_id(std::string(change.model_id));
  event->set_replica_id(std::string(change.replica_id));
  event->set_prefix_hash(std::string(change.prefix_hash));
  event->set_adapter_id(std::string(change.adapter_id));
  Change removal = Change::of(nullptr, std::move(event), 0);
  if (t->in_apply) {
    t->removals_in_apply.push_back(std::move(removal));
    return;
  }
  enqueue(*t, std::move(removal));
  schedule_flush(owner);
}

void SpreadPlacement::enqueue(Tenant& t, Change change) {
  for (unsigned core : t.cores) {
    if (core == t.owner) continue;
    Tenant::Link& link = *t.links[core];
    link.queued_bytes += change.bytes;
    link.queued.push_back(change);
    if (link.queued.size() > options_.max_queued || link.queued_bytes > options_.max_queued_bytes) {
      resync(t, core);
    }
  }
}

void SpreadPlacement::schedule_flush(unsigned owner) {
  CoreState& state = *per_core_[owner];
  if (state.flush_scheduled) return;
  state.flush_scheduled = true;
  cores_.defer([this, owner] { flush(owner); });
}

void SpreadPlacement::flush(unsigned owner) {
  per_core_[owner]->flush_scheduled = false;
  for (Tenant* t : per_core_[owner]->owned) {
    for (unsigned core : t->cores) {
      if (core != owner) flush_link(*t, core);
    }
  }
}

// Sends everything queued for (t, core) as one batch, in order. A full
// mailbox keeps it queued, counts it and retries from a timer; nothing is
// sent past a refused batch, so the order holds.
bool SpreadPlacement::flush_link(Tenant& t, unsigned core) {
  Tenant::Link& link = *t.links[core];
  if (link.queued.empty() || link.retry_armed) return true;
  Batch batch;
  batch.changes.assign(std::make_move_iterator(link.queued.begin()),
                       std::make_move_iterator(link.queued.end()));
  link.queued.clear();
  const std::size_t n = batch.changes.size();
  const std::size_t bytes = std::exchange(link.queued_bytes, 0);
  struct Send {  // the mailbox task: the batch, applied on the copy core
    SpreadPlacement* self;
    Tenant* tenant;
    unsigned core;
    Batch batch;
    void operator()() { self->apply_batch(*tenant, core, batch); }
  };
  runtime::Task task(Send{this, &t, core, std::move(batch)});
  const bool sent = cores_.try_push(core, task);
  // The owner core's cross-core post figures (/metrics) count forwards too.
  metrics::local().add_cross_core_post(sent);
  if (sent) {
    counters_.forwarded.fetch_add(n, std::memory_order_relaxed);
    return true;
  }
  counters_.mailbox_full.fetch_add(1, std::memory_order_relaxed);
  Batch back = std::move(std::move(task).take<Send>().batch);
  link.queued.insert(link.queued.begin(), std::make_move_iterator(back.changes.begin()),
                     std::make_move_iterator(back.changes.end()));
  link.queued_bytes += bytes;
  link.retry_armed = true;
  cores_.timers().add_timer(options_.retry_us, [this, tenant = &t, core] {
    tenant->links[core]->retry_armed = false;
    flush_link(*tenant, core);
  });
  return false;
}

// The queue outgrew its bound: drop it, stop the copy answering (its core
// goes to the owner) and queue the owner's full export of the tenant,
// which the copy loads into a fresh shard before answering again.
void SpreadPlacement::resync(Tenant& t, unsigned core) {
  Tenant::Link& link = *t.links[core];
  const std::uint32_t generation = link.wanted.fetch_add(1, std::memory_order_acq_rel) + 1;
  link.queued.clear();
  link.queued_bytes = 0;  // the export is what a resync costs, whatever its size
  counters_.resyncs.fetch_add(1, std::memory_order_relaxed);
  base::log(base::LogLevel::warn, "spread tenant copy resynchronized: its core fell behind",
            {{"tenant", t.id},
             {"core", core},
             {"max_queued", options_.max_queued},
             {"max_queued_bytes", options_.max_queued_bytes}});
  Change reset;
  reset.reset =
      std::make_shared<const std::vector<std::string>>(export_tenant(*owners_[t.owner], t.id));
  reset.generation = generation;
  link.queued.push_back(std::move(reset));
}

// ----------------------------------------------------------- the copy's side

void SpreadPlacement::apply_batch(Tenant& t, unsigned core, Batch& batch) {
  Tenant::Copy& copy = *t.copies[core];
  for (const Change& change : batch.changes) {
    if (change.reset) {
      copy.shard = new_copy(core);  // the old copy's entries leave the global count
      load_chunks(*copy.shard, *change.reset);
      copy.applied.store(change.generation, std::memory_order_release);
    } else if (change.update) {
      sharding::wire::ingest(*copy.shard, *change.update, change.wall_us);
    } else {
      sharding::wire::apply_event(*copy.shard, *change.event, change.wall_us);
    }
  }
}

void SpreadPlacement::policies_changed(unsigned core,
                                       const std::shared_ptr<const config::PolicySet>& set) {
  CoreState& state = *per_core_[core];
  state.copy_policies = without_quotas(set ? *set : *config::PolicySet::defaults());
  for (const auto& t : tenants_) {
    if (t->copies[core]) t->copies[core]->shard->set_policies(state.copy_policies);
  }
}

void SpreadPlacement::set_change_sink(unsigned core, index::ChangeSink* sink) {
  if (per_core_[core]->sink) {
    per_core_[core]->sink->downstream = sink;
  } else {
    owners_[core]->set_change_sink(sink);
  }
}

}  // namespace ic::placement
