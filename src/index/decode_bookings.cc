// Decode load of LookupPDRoute (docs/pd-routing.md "Decode load"): every
// answer that names a decode replica books one of its slots. A slot is freed
// by an event of that replica that frees the request's KV — the eviction of
// the request's last booked block (PREFIX_EVICTED) or ALL_CLEARED — or at the
// topology's decodeHoldMs. Soft state of the scope on its owner core, beside
// the prefill bookings (bookings.cc): never persisted, replicated or exported.

#include <algorithm>

#include "index/detail/shard_impl.hh"

namespace ic::index {

using namespace detail;

namespace {

// Decode bookings one scope holds at most; a new one past that ends the
// soonest to expire.
constexpr std::uint32_t kMaxDecodeBookings = 256;

}  // namespace

void Shard::Impl::end_decode(WorkState& ws, DecodeBooking& b) {
  if (ReplicaWork* w = find_work(ws, b.replica); w != nullptr && w->decode_open > 0) {
    --w->decode_open;
    auto& starts = w->decode_starts;
    if (auto it = std::lower_bound(starts.begin(), starts.end(), b.starts_at);
        it != starts.end() && *it == b.starts_at)
      starts.erase(it);
  }
  b.replica = kNone;
  --ws.decodes_live;
}

void Shard::Impl::expire_decodes(WorkState& ws, std::int64_t now) {
  if (ws.decodes_live == 0 || now < ws.next_decode_expiry) return;
  ws.next_decode_expiry = INT64_MAX;
  for (DecodeBooking& b : ws.decodes) {
    if (b.replica == kNone) continue;
    if (b.expires_at <= now) {
      end_decode(ws, b);
    } else {
      ws.next_decode_expiry = std::min(ws.next_decode_expiry, b.expires_at);
    }
  }
}

bool Shard::Impl::holds_booking(const WorkState& ws, std::uint32_t replica, bool chain) const {
  const std::size_t n = std::min<std::size_t>(work_keys.size(), 1024);
  if (n == 0) return false;
  for (const Booking& b : ws.bookings) {
    if (b.replica == replica && b.chain == chain && b.blocks.size() == n &&
        b.blocks.back() == work_keys[n - 1])
      return true;
  }
  return false;
}

void Shard::Impl::book_decode(LookupState& st, std::uint32_t replica, std::int64_t start_us,
                              std::int64_t hold_us) {
  WorkState& ws = scopes[st.scope].work;
  DecodeBooking* slot = nullptr;
  if (ws.decodes_live >= kMaxDecodeBookings) {
    for (DecodeBooking& b : ws.decodes) {
      if (b.replica != kNone && (slot == nullptr || b.expires_at < slot->expires_at)) slot = &b;
    }
    end_decode(ws, *slot);
  } else {
    for (DecodeBooking& b : ws.decodes) {
      if (b.replica == kNone) {
        slot = &b;
        break;
      }
    }
    if (slot == nullptr) slot = &ws.decodes.emplace_back();
  }
  ReplicaWork& w = work_of(ws, replica, st.now);
  ++w.decode_open;
  w.last_active = st.now;
  if (work_keys.empty()) hash_request(st);
  const std::size_t booked = std::min<std::size_t>(work_keys.size(), 1024);
  slot->replica = replica;
  slot->starts_at = st.now + start_us;
  w.decode_starts.insert(
      std::upper_bound(w.decode_starts.begin(), w.decode_starts.end(), slot->starts_at),
      slot->starts_at);
  slot->expires_at = slot->starts_at + hold_us;
  ws.next_decode_expiry = std::min(ws.next_decode_expiry, slot->expires_at);
  slot->key = booked > 0 ? work_keys[booked - 1] : 0;
  ++ws.decodes_live;
}

void Shard::Impl::release_decodes(std::uint32_t tm, std::uint32_t replica, std::uint64_t key,
                                  bool all) {
  for (ScopeRec& sr : scopes) {
    if (!sr.live || sr.tm != tm || sr.work.decodes_live == 0) continue;
    for (DecodeBooking& b : sr.work.decodes) {
      if (b.replica == replica && (all || b.key == key)) end_decode(sr.work, b);
    }
  }
}

}  // namespace ic::index
