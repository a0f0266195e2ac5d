// Bookings and learned prefill rates of the work-aware ranking (docs/ranking.md
// "Bookings", "Learned rate"). Every answered hint books the request's
// uncached tokens and its blocks on the replica it names; a booking ends when
// the replica's report stores its last block (ingest), when a later booking of
// the same replica completes first (the replica prefills in arrival order, so
// this one was not sent there), or at its bound. A replica whose pressure
// counts fewer requests than its bookings sheds the oldest (displaced: on no
// queue) to a replica counting requests it was not booked (settle_count). A replica's queue is a
// virtual time, busy_until: each booking extends it by tokens / rate, it
// drains as the wall clock passes it, and every report of new blocks resets it
// to now + the tokens still booked / rate. The rate is learned from completed
// bookings: tokens / (completion − max(booked, previous completion)).
// Soft state of the scope on its owner core: nothing here is an entry.

#include <algorithm>

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

namespace {

// Bookings one scope holds at most; a new one past that ends the oldest.
constexpr std::uint32_t kMaxBookings = 256;
// Blocks of one booking kept as speculative entries (a longer prompt books all
// its tokens but only its first blocks).
constexpr std::size_t kMaxBookedBlocks = 1024;
// A freed booking keeps its block buffer up to this capacity.
constexpr std::size_t kKeptBlockCapacity = 256;
// Completions the learned rate and completion time remember (decay 1 − 1/window).
constexpr double kRateWindow = 16;
// Bookings the mean booking size remembers (decay 1 − 1/window).
constexpr double kMeanWindow = 64;
// The bound is this many mean completion times (and at least twice the
// booking's own estimate), at most kMaxBoundUs.
constexpr double kBoundFactor = 4;
constexpr std::int64_t kMaxBoundUs = 5LL * 60 * 1'000'000;
// A request reaches its engine within this long after its LookupRoute answer
// (the gateway forwards it at once): a booking younger than that may not be
// counted yet in the engine's load when it reports pressure 0.
constexpr std::int64_t kIdleGraceUs = 100'000;

std::int64_t micros(double tokens, double rate) {
  return static_cast<std::int64_t>(tokens / rate * 1e6);
}

// The bucket index of WorkState::heads (first block's key → slots): O(1) link
// and unlink, so a lookup's match_bookings visits one bucket, not every slot.
void link_first(WorkState& ws, std::uint32_t slot) {
  Booking& b = ws.bookings[slot];
  std::uint32_t& head = ws.heads[b.blocks[0] & (ws.heads.size() - 1)];
  b.prev_same = kNone;
  b.next_same = head;
  if (head != kNone) ws.bookings[head].prev_same = slot;
  head = slot;
}

void unlink_first(WorkState& ws, std::uint32_t slot) {
  Booking& b = ws.bookings[slot];
  if (b.prev_same != kNone) {
    ws.bookings[b.prev_same].next_same = b.next_same;
  } else {
    ws.heads[b.blocks[0] & (ws.heads.size() - 1)] = b.next_same;
  }
  if (b.next_same != kNone) ws.bookings[b.next_same].prev_same = b.prev_same;
  b.next_same = b.prev_same = kNone;
}

// Keeps heads at ≥ 2 buckets per slot (chains short): rebuilt when the slots grew.
void size_heads(WorkState& ws) {
  if (ws.heads.size() >= 2 * ws.bookings.size()) return;
  std::size_t n = 16;
  while (n < 2 * ws.bookings.size()) n *= 2;
  ws.heads.assign(n, kNone);
  for (std::uint32_t i = 0; i < ws.bookings.size(); ++i) {
    const Booking& b = ws.bookings[i];
    if (b.replica != kNone && !b.displaced && !b.blocks.empty()) link_first(ws, i);
  }
}

}  // namespace

double Shard::Impl::rate_of(const WorkState& ws, const ReplicaWork& w) const {
  return w.rate > 0 ? w.rate : prior_rate(&ws);
}

double Shard::Impl::prior_rate(const WorkState* ws) const {
  // A replica the scope has not timed yet is priced like the ones it has: the
  // knob is a guess (and on another clock than the replicas'), so an idle
  // replica priced at the knob while the timed ones run faster would look
  // slower than it is and never be picked, never timed.
  return ws != nullptr && ws->prior_rate > 0 ? ws->prior_rate : cfg.work_aware.prefill_tokens_per_s;
}

void Shard::Impl::learn_rate(WorkState& ws, ReplicaWork& w, double tokens, std::int64_t took_us) {
  if (tokens <= 0 || took_us <= 0) return;
  const double keep = 1.0 - 1.0 / kRateWindow;
  w.sample_tokens = keep * w.sample_tokens + tokens;
  w.sample_us = keep * w.sample_us + static_cast<double>(took_us);
  w.rate = w.sample_tokens / w.sample_us * 1e6;
  update_prior_rate(ws);
}

void Shard::Impl::update_prior_rate(WorkState& ws) {
  double sum = 0;
  std::size_t n = 0;
  for (const ReplicaWork& w : ws.replicas) {
    if (w.rate <= 0) continue;
    sum += w.rate;
    ++n;
  }
  ws.prior_rate = n > 0 ? sum / static_cast<double>(n) : 0;
}

ReplicaWork* Shard::Impl::find_work(WorkState& ws, std::uint32_t replica) {
  for (ReplicaWork& w : ws.replicas) {
    if (w.replica == replica) return &w;
  }
  return nullptr;
}

ReplicaWork& Shard::Impl::work_of(WorkState& ws, std::uint32_t replica, std::int64_t now) {
  if (ReplicaWork* w = find_work(ws, replica)) return *w;
  replicas.ref(replica);
  ReplicaWork& w = ws.replicas.emplace_back();
  w.replica = replica;
  w.busy_until = now;
  w.last_active = now;
  return w;
}

void Shard::Impl::end_booking(WorkState& ws, Booking& b, bool completed) {
  if (ReplicaWork* w = find_work(ws, b.replica)) {
    if (!b.displaced) {
      --w->open;
      w->open_tokens -= b.tokens;
    }
    ++(completed ? w->completed : w->expired);
  }
  if (!b.blocks.empty() && !b.displaced)
    unlink_first(ws, static_cast<std::uint32_t>(&b - ws.bookings.data()));
  b.replica = kNone;
  b.done = false;
  b.prefilled = false;
  b.displaced = false;
  b.blocks.clear();
  if (b.blocks.capacity() > kKeptBlockCapacity) std::vector<std::uint64_t>().swap(b.blocks);
  --ws.live;
}

Booking& Shard::Impl::book(WorkState& ws, std::uint32_t replica, std::int64_t now,
                           std::int64_t tokens, bool chain, std::span<const std::uint64_t> keys) {
  Booking* slot = nullptr;
  if (ws.live >= kMaxBookings) {
    // Full: the oldest booking makes room.
    for (Booking& b : ws.bookings) {
      if (b.replica != kNone && (slot == nullptr || b.seq < slot->seq)) slot = &b;
    }
    end_booking(ws, *slot, false);
  } else {
    for (Booking& b : ws.bookings) {
      if (b.replica == kNone) {
        slot = &b;
        break;
      }
    }
    if (slot == nullptr) {
      slot = &ws.bookings.emplace_back();
      size_heads(ws);  // before the new slot is linked
    }
  }
  ReplicaWork& w = work_of(ws, replica, now);
  const double rate = rate_of(ws, w);
  w.busy_until = std::max(w.busy_until, now) + micros(static_cast<double>(tokens), rate);
  ws.mean_booking_tokens += (static_cast<double>(tokens) - ws.mean_booking_tokens) /
                            (ws.mean_booking_tokens > 0 ? kMeanWindow : 1.0);
  ++w.open;
  w.open_tokens += tokens;
  w.last_active = now;
  const std::int64_t learned = w.latency_us > 0
                                   ? static_cast<std::int64_t>(kBoundFactor * w.latency_us)
                                   : cfg.work_aware.first_bound_us;
  const std::int64_t bound = std::min(kMaxBoundUs, std::max(2 * (w.busy_until - now), learned));
  slot->replica = replica;
  slot->chain = chain;
  slot->done = false;
  slot->displaced = false;
  slot->seq = ++booking_seq;
  slot->booked_at = now;
  slot->expires_at = now + bound;
  slot->tokens = tokens;
  slot->prompt = tokens;
  slot->blocks.assign(keys.begin(), keys.begin() + std::min(keys.size(), kMaxBookedBlocks));
  if (!slot->blocks.empty()) link_first(ws, static_cast<std::uint32_t>(slot - ws.bookings.data()));
  ws.next_expiry = std::min(ws.next_expiry, slot->expires_at);
  ++ws.live;
  return *slot;
}

void Shard::Impl::expire_work(WorkState& ws, std::int64_t now) {
  if (ws.live > 0 && now >= ws.next_expiry) {
    ws.next_expiry = INT64_MAX;
    for (Booking& b : ws.bookings) {
      if (b.replica == kNone) continue;
      if (b.expires_at <= now) {
        end_booking(ws, b, false);
      } else {
        ws.next_expiry = std::min(ws.next_expiry, b.expires_at);
      }
    }
  }
  // Forget the records of replicas idle for the stats window.
  bool forgot = false;
  for (std::size_t i = ws.replicas.size(); i-- > 0;) {
    ReplicaWork& w = ws.replicas[i];
    if (w.open > 0 || w.decode_open > 0 || now - w.last_active < cfg.load_stats_window_us) continue;
    replicas.release(w.replica);
    w = ws.replicas.back();
    ws.replicas.pop_back();
    forgot = true;
  }
  if (forgot) update_prior_rate(ws);
}

void Shard::Impl::note_stored_chain(WorkState& ws, std::uint32_t replica,
                                    std::span<const std::uint64_t> chain, std::int64_t now) {
  for (Booking& b : ws.bookings) {
    if (b.replica == kNone || !b.chain || b.done || b.blocks.empty()) continue;
    const std::size_t last = b.blocks.size() - 1;
    if (last >= chain.size() || chain[last] != b.blocks[last]) continue;
    if (b.displaced) {
      end_booking(ws, b, false);  // on no queue: nothing to settle
    } else if (b.replica == replica) {
      b.done = true;
    } else {
      end_elsewhere(ws, b, now);
    }
  }
}

void Shard::Impl::end_elsewhere(WorkState& ws, Booking& b, std::int64_t now) {
  // Another replica stored the booked prompt: the gateway sent the request
  // there, not here. Its work leaves this replica's queue and its blocks stop
  // being speculative entries here (the next turn would follow them to a
  // replica that never held them).
  if (ReplicaWork* w = find_work(ws, b.replica)) {
    w->busy_until =
        std::max(now, w->busy_until - micros(static_cast<double>(b.tokens), rate_of(ws, *w)));
  }
  end_booking(ws, b, false);
}

void Shard::Impl::note_stored_key(WorkState& ws, std::uint32_t replica, std::uint64_t key,
                                  std::int64_t now) {
  for (Booking& b : ws.bookings) {
    if (b.replica == kNone || b.done || b.blocks.empty() || b.blocks.back() != key) continue;
    if (b.displaced) {
      end_booking(ws, b, false);
    } else if (b.replica == replica) {
      b.done = true;
    } else {
      end_elsewhere(ws, b, now);
    }
  }
}

void Shard::Impl::settle_stored(std::uint32_t scope, std::uint32_t replica, std::int64_t now,
                                bool new_blocks) {
  WorkState& ws = scopes[scope].work;
  ReplicaWork* w = find_work(ws, replica);
  if (w == nullptr) return;
  const double keep = 1.0 - 1.0 / kRateWindow;
  double tokens = 0;
  std::int64_t first_booked = INT64_MAX;
  std::uint64_t last_seq = 0;
  bool completed = false;
  for (Booking& b : ws.bookings) {
    if (b.replica != replica || !b.done) continue;
    completed = true;
    tokens += static_cast<double>(b.tokens);
    first_booked = std::min(first_booked, b.booked_at);
    last_seq = std::max(last_seq, b.seq);
    const double took = static_cast<double>(now - b.booked_at);
    w->latency_us = w->latency_us > 0 ? keep * w->latency_us + (1 - keep) * took : took;
    end_booking(ws, b, true);
  }
  if (!completed && !new_blocks) return;
  if (completed) {
    // Prefill runs in arrival order: an older booking still open was not sent here.
    for (Booking& b : ws.bookings) {
      if (b.replica == replica && !b.displaced && b.seq < last_seq) end_booking(ws, b, false);
    }
    const std::int64_t took = now - std::max(first_booked, w->last_done);
    learn_rate(ws, *w, tokens, took);
  }
  w->last_done = now;
  w->last_active = now;
  w->busy_until = now + micros(static_cast<double>(w->open_tokens), rate_of(ws, *w));
}

void Shard::Impl::settle_idle(std::uint32_t scope, std::uint32_t replica, std::int64_t seen,
                              std::int64_t now) {
  // Pressure 0 is an engine with nothing running or waiting (docs/kvevents.md:
  // (running + waiting) / ceiling). A booking made before that is not queued
  // there: the gateway sent the request elsewhere (it did not follow the hint),
  // or the request is done and its report is on its way. Either way it is no
  // longer work waiting on this replica; kept, it would keep the replica
  // looking busy until its bound while it idles.
  // Its queue is the bookings left (none counted without one: no floor).
  if (scope == kNone) return;
  WorkState& ws = scopes[scope].work;
  ReplicaWork* w = find_work(ws, replica);
  if (w == nullptr) return;
  w->unbooked = 0;
  for (Booking& b : ws.bookings) {
    if (b.replica == replica && !b.displaced && b.booked_at + kIdleGraceUs <= seen)
      end_booking(ws, b, false);
  }
  w->busy_until = now + micros(static_cast<double>(w->open_tokens), rate_of(ws, *w));
}

void Shard::Impl::clear_unbooked(std::uint32_t scope, std::uint32_t replica, std::int64_t now) {
  if (scope == kNone) return;
  WorkState& ws = scopes[scope].work;
  ReplicaWork* w = find_work(ws, replica);
  if (w == nullptr) return;
  w->unbooked = 0;
  // The floor raised busy_until past its bookings' work (settle_count); that
  // time goes too, else the floor outlives its count until it drains.
  w->busy_until =
      std::min(w->busy_until, now + micros(static_cast<double>(w->open_tokens), rate_of(ws, *w)));
}

void Shard::Impl::settle_count(std::uint32_t scope, std::uint32_t replica, std::int64_t requests,
                               std::int64_t seen, std::int64_t now) {
  // Pressure 0 (settle_idle) generalised: the engine has `requests` running or
  // waiting, of every scope it serves. A booking made before that reading
  // (its request had time to arrive) beyond that many is not there: the
  // gateway sent it elsewhere (or it is done and its report is on its way).
  // Which of them is unknown; the oldest leave first (a FIFO engine finishes
  // them first). Kept, they inflate the replica's wait with work it never got.
  // Fewer bookings than requests: the gateway sent it work without a booking,
  // where the displaced bookings of the scope went.
  if (scope == kNone || scopes[scope].work.live == 0) return;
  WorkState& ws = scopes[scope].work;
  std::int64_t old = 0, all = 0;
  for (const Booking& b : ws.bookings) {
    if (b.replica != replica || b.displaced) continue;
    ++all;
    old += b.booked_at + kIdleGraceUs <= seen ? 1 : 0;
  }
  if (all < requests) {
    ReplicaWork& w = work_of(ws, replica, now);
    w.unbooked = requests - all;
    // The newest first: the likeliest still queued there.
    while (w.unbooked > 0) {
      Booking* newest = nullptr;
      for (Booking& b : ws.bookings) {
        if (b.replica != kNone && b.displaced && b.booked_at + kIdleGraceUs <= seen &&
            (newest == nullptr || b.seq > newest->seq))
          newest = &b;
      }
      if (newest == nullptr) break;
      place_displaced(ws, *newest, w, now);
    }
    // The rest, no booking known: each an average booking's work. Its queue
    // is at least that and its bookings' (a floor at each count, not added:
    // the next reading counts them again).
    const double unbooked = static_cast<double>(w.unbooked) * ws.mean_booking_tokens;
    w.busy_until = std::max(
        w.busy_until, now + micros(static_cast<double>(w.open_tokens) + unbooked, rate_of(ws, w)));
    return;
  }
  if (ReplicaWork* w = find_work(ws, replica)) w->unbooked = 0;
  for (std::int64_t excess = old - requests; excess > 0; --excess) {
    Booking* oldest = nullptr;
    for (Booking& b : ws.bookings) {
      if (b.replica == replica && !b.displaced && b.booked_at + kIdleGraceUs <= seen &&
          (oldest == nullptr || b.seq < oldest->seq))
        oldest = &b;
    }
    displace(ws, *oldest, now);
  }
}

void Shard::Impl::displace(WorkState& ws, Booking& b, std::int64_t now) {
  // Off its replica's queue and out of the speculative entries, as if another
  // replica had stored it (end_elsewhere), but kept: a replica counting
  // requests it was not booked takes it.
  ReplicaWork* w = find_work(ws, b.replica);
  if (w != nullptr) {
    w->busy_until =
        std::max(now, w->busy_until - micros(static_cast<double>(b.tokens), rate_of(ws, *w)));
    --w->open;
    w->open_tokens -= b.tokens;
  }
  if (!b.blocks.empty()) unlink_first(ws, static_cast<std::uint32_t>(&b - ws.bookings.data()));
  b.displaced = true;
  // A replica that already counted more requests than it was booked takes it.
  ReplicaWork* to = nullptr;
  for (ReplicaWork& r : ws.replicas) {
    if (r.unbooked > 0 && r.replica != b.replica && !decode_only(r.replica) &&
        (to == nullptr || r.unbooked > to->unbooked))
      to = &r;
  }
  if (to != nullptr) place_displaced(ws, b, *to, now);
}

void Shard::Impl::place_displaced(WorkState& ws, Booking& b, ReplicaWork& w, std::int64_t now) {
  // Its tokens join w's queue (what w holds of the prompt is unknown: the
  // tokens the booked replica lacked) and its blocks are speculative entries
  // there, so the next turn follows them where the request went.
  --w.unbooked;
  b.displaced = false;
  b.replica = w.replica;
  w.busy_until =
      std::max(w.busy_until, now) + micros(static_cast<double>(b.tokens), rate_of(ws, w));
  ++w.open;
  w.open_tokens += b.tokens;
  w.last_active = now;
  if (!b.blocks.empty()) link_first(ws, static_cast<std::uint32_t>(&b - ws.bookings.data()));
}

void Shard::Impl::clear_work(WorkState& ws) {
  for (const ReplicaWork& w : ws.replicas) replicas.release(w.replica);
  ws = WorkState{};
}

}  // namespace ic::index
