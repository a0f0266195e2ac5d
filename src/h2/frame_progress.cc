#include "h2/frame_progress.hh"

#include <algorithm>

namespace ic::h2 {

namespace {
constexpr std::uint8_t kHeaders = 0x1;
constexpr std::uint8_t kPushPromise = 0x5;
constexpr std::uint8_t kContinuation = 0x9;
constexpr std::uint8_t kEndHeaders = 0x4;
}  // namespace

void FrameProgress::feed(std::span<const std::byte> data) {
  std::size_t i = 0;
  if (preface_left_ > 0) {
    const std::size_t n = std::min(preface_left_, data.size());
    preface_left_ -= n;
    i = n;
    if (preface_left_ == 0) ++units_;
  }
  while (i < data.size()) {
    if (payload_left_ > 0) {
      const std::size_t n = std::min(payload_left_, data.size() - i);
      payload_left_ -= n;
      i += n;
      if (in_block_frame_) block_bytes_ += n;
      if (payload_left_ == 0 && !in_header_block_) ++units_;
      continue;
    }
    header_[header_got_++] = static_cast<std::uint8_t>(data[i++]);
    if (header_got_ == kFrameHeaderBytes) on_header();
  }
}

void FrameProgress::on_header() {
  header_got_ = 0;
  payload_left_ = (std::size_t{header_[0]} << 16) | (std::size_t{header_[1]} << 8) | header_[2];
  const std::uint8_t type = header_[3];
  const bool end_headers = (header_[4] & kEndHeaders) != 0;
  in_block_frame_ = type == kHeaders || type == kPushPromise || type == kContinuation;
  if (type == kHeaders || type == kPushPromise) {
    in_header_block_ = !end_headers;
    block_bytes_ = 0;
  } else if (type == kContinuation && end_headers) {
    in_header_block_ = false;
  }
  if (payload_left_ == 0 && !in_header_block_) ++units_;
}

}  // namespace ic::h2
