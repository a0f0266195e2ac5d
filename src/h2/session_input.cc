// ServerSession's input budget (docs/hostile-peers.md "Fair turns" and
// "Costly peers"): on_data (server_session.cc) feeds nghttp2_session_mem_recv
// in slices until the bytes are consumed or the turn's budget is spent; what
// is left is held here, reading paused, for the next turn's flush(). One
// peer's burst (a rapid reset, an HPACK bomb up to its cut, a header flood)
// then delays the other connections of its core by about one budget, not by
// the whole burst.

#include <nghttp2/nghttp2.h>

#include <algorithm>

#include "h2/server_session.hh"

namespace ic::h2 {

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
  turn_bytes_ = 0;
  if (!held_in_.empty()) conn_.request_flush();
}

bool ServerSession::input_budget_spent() const {
  return turn_frames_ >= limits_.turn_input_frames || turn_streams_ >= limits_.turn_input_streams ||
         turn_header_bytes_ >= limits_.turn_input_header_bytes ||
         turn_bytes_ >= limits_.turn_input_bytes;
}

void ServerSession::fail_input() {
  held_in_.clear();
  held_off_ = 0;
  // nghttp2 queued GOAWAY itself for protocol errors (bad preface, ...); our
  // own limits, which stopped parsing inside a callback, get ENHANCE_YOUR_CALM.
  if (bomb_) {
    calm_down(LimitHit::kHpackExpansion);
  } else if (control_tokens_.flooded || reset_tokens_.flooded ||
             recv_error_ == NGHTTP2_ERR_FLOODED ||
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
