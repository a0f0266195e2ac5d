// The global cap across shards (docs/hostile-peers.md "Global cap"): each
// shard near the cap publishes the last_seen of its next cap victim; a shard
// whose ingest crosses the cap evicts its own victims only while they are the
// globally oldest within cap_slack_us, and leaves the rest as debt for the
// shard that holds the oldest entry, which pays it on its own core. Nothing
// here runs on the lookup path.

#include <algorithm>

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

std::uint32_t Shard::Impl::peek_victim() {
  if (entry_total == 0) return kNone;
  std::uint32_t e = victims_valid ? pop_victim() : kNone;
  if (e == kNone) {
    rebuild_victims();
    e = pop_victim();
  }
  if (e != kNone) --group_pos;  // pop_victim took it from `group`: put it back
  return e;
}

void Shard::Impl::publish_oldest() {
  if (slot < 0) return;
  const std::uint32_t e = peek_victim();
  globals->oldest[slot].last_seen.store(e == kNone ? INT64_MAX : entry(e).last_seen,
                                        std::memory_order_relaxed);
}

void Shard::Impl::note_oldest(std::int64_t total) {
  // Far below the cap nobody compares ages: skip the victim peek.
  if (total >= cfg.max_entries - slack_entries() || entry_total == 0) publish_oldest();
}

std::pair<std::int64_t, int> Shard::Impl::oldest_elsewhere() const {
  std::int64_t best = INT64_MAX;
  int best_slot = -1;
  const unsigned n =
      std::min(globals->shard_count.load(std::memory_order_relaxed), IndexGlobals::kMaxShards);
  for (unsigned i = 0; i < n; ++i) {
    if (static_cast<int>(i) == slot) continue;
    const std::int64_t v = globals->oldest[i].last_seen.load(std::memory_order_relaxed);
    if (v < best) {
      best = v;
      best_slot = static_cast<int>(i);
    }
  }
  return {best, best_slot};
}

bool Shard::Impl::within_slack(std::uint32_t e, std::int64_t elsewhere) const {
  if (elsewhere == INT64_MAX || slot < 0) return true;
  return entry(e).last_seen <= elsewhere + cfg.cap_slack_us;
}

std::int64_t Shard::Impl::slack_entries() const {
  return cfg.cap_slack_entries > 0 ? cfg.cap_slack_entries
                                   : std::max<std::int64_t>(16, cfg.max_entries / 1024);
}

namespace {
// Takes up to `n` entries of debt; returns how many were taken.
std::int64_t claim_debt(std::atomic<std::int64_t>& debt, std::int64_t n) {
  std::int64_t d = debt.load(std::memory_order_relaxed);
  for (;;) {
    const std::int64_t take = std::min(n, d);
    if (take <= 0) return 0;
    if (debt.compare_exchange_weak(d, d - take, std::memory_order_relaxed)) return take;
  }
}
}  // namespace

std::uint32_t Shard::Impl::settle_cap(std::int64_t total, int& handoff) {
  // Entries over the cap not already owed by an older shard.
  std::int64_t need = total - cfg.max_entries - globals->cap_debt.load(std::memory_order_relaxed);
  std::uint32_t done = 0;
  while (need > 0) {
    const std::uint32_t e = peek_victim();
    const auto [elsewhere, where] = oldest_elsewhere();
    if (e == kNone || !within_slack(e, elsewhere)) {
      handoff = where;
      break;
    }
    evict_victim(e);
    ++done;
    --need;
  }
  if (need > 0 && handoff >= 0) {
    // Owed by the older shard; past the slack this shard evicts its own so
    // the total never passes cap + slack.
    const std::int64_t debt = globals->cap_debt.fetch_add(need, std::memory_order_relaxed) + need;
    const std::int64_t over = debt - slack_entries();
    if (over > 0) done += evict_cap(claim_debt(globals->cap_debt, std::min(over, need)));
  } else {
    handoff = -1;
  }
  publish();
  publish_oldest();
  return done;
}

CapPayment Shard::Impl::pay_cap_debt() {
  CapPayment p;
  for (;;) {
    std::int64_t debt = globals->cap_debt.load(std::memory_order_relaxed);
    if (debt <= 0) break;
    const std::int64_t over = publish() - cfg.max_entries;
    if (over < debt) {
      // Removals elsewhere (TTL, events) paid part of it already.
      globals->cap_debt.compare_exchange_weak(debt, std::max<std::int64_t>(over, 0),
                                              std::memory_order_relaxed);
      continue;
    }
    const std::uint32_t e = peek_victim();
    const auto [elsewhere, where] = oldest_elsewhere();
    if (e == kNone || !within_slack(e, elsewhere)) {
      p.handoff = where;
      break;
    }
    if (!globals->cap_debt.compare_exchange_weak(debt, debt - 1, std::memory_order_relaxed)) {
      continue;
    }
    evict_victim(e);
    ++p.evicted;
  }
  publish();
  publish_oldest();
  return p;
}

CapPayment Shard::pay_cap_debt() { return impl_->pay_cap_debt(); }

int Shard::cap_slot() const noexcept { return impl_->slot; }

}  // namespace ic::index
