// What a gateway tells the work-aware ranking about the requests its answers
// booked (docs/ranking.md "Feedback"): the endpoint picker (gateway/picker.hh)
// sees the response side of every request it picked, so it knows which
// replica served, when the first byte came back and when the request ended —
// sooner and surer than the engine's KV report. A served replica other than
// the booked one moves the booking; the first byte ends the booking's prefill
// work and times the replica's rate; the end releases what is left. Soft state
// of the scope on its owner core, like the bookings themselves (bookings.cc).

#include <algorithm>

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

namespace {

std::int64_t micros(double tokens, double rate) {
  return static_cast<std::int64_t>(tokens / rate * 1e6);
}

}  // namespace

BookingRef Shard::last_booking() const noexcept { return impl_->last_booking; }

void Shard::feedback(const BookingFeedback& feedback, std::int64_t now_wall_us) {
  impl_->feedback(feedback, now_wall_us);
}

void Shard::queued_work(
    std::string_view tenant_id, std::string_view model_id, std::string_view hash_scheme,
    std::int64_t now_wall_us,
    const std::function<void(std::string_view replica_id, std::int64_t queued_us)>& fn) {
  Impl& s = *impl_;
  const std::uint32_t tm = s.find_tm(s.tenants.find(tenant_id), s.models.find(model_id));
  if (tm == kNone) return;
  const std::uint32_t scope = s.find_scope(tm, s.schemes.find(hash_scheme));
  if (scope == kNone) return;
  for (const ReplicaWork& w : s.scopes[scope].work.replicas)
    fn(s.replicas.name(w.replica), std::max<std::int64_t>(0, w.busy_until - now_wall_us));
}

Booking* Shard::Impl::find_booking(BookingRef ref) {
  if (!ref.valid() || ref.scope >= scopes.size() || !scopes[ref.scope].live) return nullptr;
  for (Booking& b : scopes[ref.scope].work.bookings) {
    if (b.replica != kNone && b.seq == ref.seq) return &b;
  }
  return nullptr;
}

void Shard::Impl::feedback(const BookingFeedback& f, std::int64_t now) {
  Booking* b = find_booking(f.booking);
  if (b == nullptr) return;  // ended already (report, bound, overtaken): nothing to correct
  WorkState& ws = scopes[f.booking.scope].work;
  if (b->displaced) {
    // On no queue (settle_count): a served replica takes it, else it ends.
    if (f.kind == BookingFeedback::Kind::kServedBy && !f.replica_id.empty()) {
      const std::uint32_t id = replicas.acquire(f.replica_id);
      ReplicaWork& w = work_of(ws, id, now);
      replicas.release(id);
      ++w.unbooked;  // place_displaced counts it off
      place_displaced(ws, *b, w, now);
    } else if (f.kind == BookingFeedback::Kind::kEnded) {
      end_booking(ws, *b, false);
    }
    return;
  }
  switch (f.kind) {
    case BookingFeedback::Kind::kServedBy:
      move_booking(ws, *b, f.replica_id, f.held_tokens, now);
      return;
    case BookingFeedback::Kind::kFirstByte:
      prefill_done(ws, *b, now);
      return;
    case BookingFeedback::Kind::kEnded:
      // Without a first byte the request never prefilled there: its work and
      // its speculative entries go, as when another replica stores the prompt.
      if (!b->prefilled) end_elsewhere(ws, *b, now);
      return;
  }
}

void Shard::Impl::move_booking(WorkState& ws, Booking& b, std::string_view name, std::int64_t held,
                               std::int64_t now) {
  if (name.empty() || replicas.name(b.replica) == name) return;
  // Off the booked replica's queue (its record exists while the booking is open).
  if (ReplicaWork* old = find_work(ws, b.replica)) {
    old->busy_until =
        std::max(now, old->busy_until - micros(static_cast<double>(b.tokens), rate_of(ws, *old)));
    --old->open;
    old->open_tokens -= b.tokens;
  }
  // Onto the served one's, priced by what it holds of the prompt.
  const std::uint32_t id = replicas.acquire(name);
  ReplicaWork& w = work_of(ws, id, now);  // holds its own reference
  replicas.release(id);
  const std::int64_t tokens = b.prefilled ? 0 : std::max<std::int64_t>(0, b.prompt - held);
  w.busy_until = std::max(w.busy_until, now) + micros(static_cast<double>(tokens), rate_of(ws, w));
  ++w.open;
  w.open_tokens += tokens;
  w.last_active = now;
  b.replica = id;
  b.tokens = tokens;
}

void Shard::Impl::prefill_done(WorkState& ws, Booking& b, std::int64_t now) {
  if (b.prefilled) return;
  ReplicaWork* w = find_work(ws, b.replica);
  if (w == nullptr) return;
  // The prefill could start when the request was booked and the replica's
  // previous prefill had ended (it prefills in arrival order).
  const std::int64_t took = now - std::max(b.booked_at, w->last_done);
  learn_rate(ws, *w, static_cast<double>(b.tokens), took);
  w->open_tokens -= b.tokens;
  b.tokens = 0;
  b.prefilled = true;
  w->last_done = now;
  w->last_active = now;
  // What is still booked is queued behind the prefill that just ended.
  w->busy_until = now + micros(static_cast<double>(w->open_tokens), rate_of(ws, *w));
}

}  // namespace ic::index
