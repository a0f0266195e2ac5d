#pragma once
// A pool of equal-size receive buffers that the kernel picks from when data
// arrives (io_uring provided buffer ring, IORING_REGISTER_PBUF_RING, Linux
// ≥ 5.19). An idle connection then holds no receive buffer at all: memory
// for reads is a fixed count × size per core (resident from startup), not a
// function of the number of open connections (docs/architecture.md rule 9:
// connection count is a hostile-peer dimension).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

struct io_uring;
struct io_uring_buf_ring;

namespace ic::runtime {

class BufferRing {
 public:
  // Registers `count` (a power of two ≤ 32768) buffers of `size` bytes as
  // buffer group `group` of `ring`. ok() is false when the kernel refused
  // (old kernel, no memory); callers then use buffers of their own.
  BufferRing(io_uring& ring, std::uint16_t group, std::uint16_t count, std::uint32_t size);
  ~BufferRing();
  BufferRing(const BufferRing&) = delete;
  BufferRing& operator=(const BufferRing&) = delete;

  bool ok() const { return registered_; }
  std::uint16_t group() const { return group_; }
  std::uint32_t buffer_size() const { return size_; }
  // The first `length` bytes of buffer `bid` (from a CQE's flags >>
  // IORING_CQE_BUFFER_SHIFT).
  std::span<const std::byte> view(std::uint16_t bid, std::size_t length) const;
  // Hands buffer `bid` back to the kernel once its bytes were consumed.
  void recycle(std::uint16_t bid);

 private:
  io_uring& ring_;
  std::uint16_t group_;
  std::uint16_t count_;
  std::uint32_t size_;
  io_uring_buf_ring* br_ = nullptr;  // page-aligned ring of buffer descriptors
  std::unique_ptr<std::byte[]> memory_;
  bool registered_ = false;
};

}  // namespace ic::runtime
