#pragma once
// Follows the frame boundaries of an HTTP/2 client's byte stream (RFC 9113
// §3.4 preface, §4.1 frame layout) without parsing payloads, so the session
// can tell whether the peer left a unit half-sent: the preface, a frame, or a
// header block (HEADERS/PUSH_PROMISE without END_HEADERS up to the
// CONTINUATION that ends it, §6.10). The connection cuts a peer that keeps a
// unit open past its deadline however slowly it trickles the bytes
// (docs/hostile-peers.md "Deadlines"). Costs a few instructions per frame.

#include <cstddef>
#include <cstdint>
#include <span>

namespace ic::h2 {

class FrameProgress {
 public:
  // Feeds the next bytes received (any split).
  void feed(std::span<const std::byte> data);
  // True while a unit is partly received.
  bool mid_unit() const {
    return preface_left_ > 0 ? preface_left_ < kPrefaceBytes
                             : header_got_ > 0 || payload_left_ > 0 || in_header_block_;
  }
  // Units completed so far (the preface, each frame outside a header block,
  // each whole header block): a wait that sees this change made progress.
  std::uint64_t units() const { return units_; }
  // Payload bytes received of the current (or last) header block: its
  // HEADERS/PUSH_PROMISE and CONTINUATION frames so far. The HPACK expansion
  // check weighs decoded bytes against what the peer actually sent.
  std::uint64_t block_bytes() const { return block_bytes_; }

  static constexpr std::size_t kPrefaceBytes = 24;
  static constexpr std::size_t kFrameHeaderBytes = 9;

 private:
  void on_header();

  std::size_t preface_left_ = kPrefaceBytes;
  std::uint8_t header_[kFrameHeaderBytes] = {};
  std::size_t header_got_ = 0;
  std::size_t payload_left_ = 0;
  bool in_header_block_ = false;
  bool in_block_frame_ = false;  // the current frame's payload belongs to a header block
  std::uint64_t block_bytes_ = 0;
  std::uint64_t units_ = 0;
};

}  // namespace ic::h2
