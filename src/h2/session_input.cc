// The input side of ServerSession (docs/hostile-peers.md "Fair turns" and
// "Costly peers"): received bytes go to nghttp2_session_mem_recv in slices
// until they are consumed or the turn's input budget is spent, and what is
// left waits, reading paused, for the next turn's flush(). One peer's burst
// (a rapid reset, an HPACK bomb up to its cut, a header flood) then delays the
// other connections of its core by about one budget, not by the whole burst.

#include <nghttp2/nghttp2.h>

#include <algorithm>

#include "h2/server_session.hh"

namespace ic::h2 {

namespace {
// Bytes per mem_recv call. The budget is checked between slices: nghttp2
// cannot be paused inside the small control frames, so a turn overshoots by
// at most one slice (~110 empty frames, a few µs).
constexpr std::size_t kSliceBytes = 1024;
}  // namespace

bool ServerSession::on_data(std::span<const std::byte> data) {
  if (closed_) return false;
  const Entry entry(*this);
  bool ok = true;
  if (held_in_.empty()) {
    const std::ptrdiff_t used = receive(data);
    ok = used >= 0;
    if (ok && static_cast<std::size_t>(used) < data.size()) {
      held_in_.assign(data.begin() + used, data.end());
      held_off_ = 0;
      apply_backpressure();  // pauses reading: the held bytes come first
    }
  } else {
    // Reading is paused while input is held, but a layer below (TLS) may
    // still hand over what it had already decrypted: keep the order.
    held_in_.insert(held_in_.end(), data.begin(), data.end());
    ok = receive_held();
  }
  if (!ok) {
    fail_input();
    out_.clear();
    pump_output();
    if (!out_.empty()) conn_.send(std::as_bytes(std::span(out_.data(), out_.size())));
    return false;
  }
  dispatch();
  return true;
}

std::ptrdiff_t ServerSession::receive(std::span<const std::byte> data) {
  std::size_t used = 0;
  while (used < data.size() && !input_budget_spent()) {
    const auto slice = data.subspan(used, std::min(kSliceBytes, data.size() - used));
    progress_.feed(slice);
    in_nghttp2_ = true;
    const auto rv = nghttp2_session_mem_recv(
        session_, reinterpret_cast<const std::uint8_t*>(slice.data()), slice.size());
    in_nghttp2_ = false;
    if (rv < 0) {
      recv_error_ = rv;
      return -1;
    }
    // nghttp2 consumes a whole slice: no callback of ours returns PAUSE.
    used += slice.size();
  }
  return static_cast<std::ptrdiff_t>(used);
}

bool ServerSession::receive_held() {
  const std::ptrdiff_t used = receive(std::span<const std::byte>(held_in_).subspan(held_off_));
  if (used < 0) return false;
  held_off_ += static_cast<std::size_t>(used);
  if (held_off_ == held_in_.size()) {
    held_in_.clear();
    held_off_ = 0;
  }
  return true;
}

bool ServerSession::resume_input() {
  if (held_in_.empty() || input_budget_spent()) return true;
  if (calm_) {
    held_in_.clear();  // the peer is being cut: nothing more of it is parsed
    held_off_ = 0;
    return true;
  }
  if (receive_held()) return true;
  fail_input();
  return false;
}

void ServerSession::end_input_turn() {
  turn_frames_ = 0;
  turn_streams_ = 0;
  turn_header_bytes_ = 0;
  if (!held_in_.empty()) conn_.request_flush();
}

bool ServerSession::input_budget_spent() const {
  return turn_frames_ >= limits_.turn_input_frames || turn_streams_ >= limits_.turn_input_streams ||
         turn_header_bytes_ >= limits_.turn_input_header_bytes;
}

void ServerSession::fail_input() {
  held_in_.clear();
  held_off_ = 0;
  // nghttp2 queued GOAWAY itself for protocol errors (bad preface, ...); our
  // own limits, which stopped parsing inside a callback, get ENHANCE_YOUR_CALM.
  if (bomb_) {
    calm_down(LimitHit::kHpackExpansion);
  } else if (control_flood_ || reset_flood_ || recv_error_ == NGHTTP2_ERR_FLOODED ||
             recv_error_ == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS) {
    calm_down(LimitHit::kFlood);
  }
}

bool ServerSession::count_decoded(std::size_t field_bytes) {
  block_decoded_bytes_ += field_bytes;
  // Weighed against the block's bytes received so far (at most one slice
  // ahead of the decoder), not the lengths its frame headers announce.
  const std::uint64_t cut = std::uint64_t{limits_.hpack_cut_lists} * limits_.max_header_list_bytes;
  if (block_decoded_bytes_ <= cut ||
      block_decoded_bytes_ <=
          std::uint64_t{limits_.hpack_max_expansion} * progress_.block_bytes()) {
    return true;
  }
  bomb_ = true;
  return false;
}

}  // namespace ic::h2
