#include "runtime/buffer_ring.hh"

#include <liburing.h>

#include <cstdlib>
#include <cstring>

namespace ic::runtime {

BufferRing::BufferRing(io_uring& ring, std::uint16_t group, std::uint16_t count, std::uint32_t size)
    : ring_(ring), group_(group), count_(count), size_(size) {
  void* descriptors = nullptr;
  if (posix_memalign(&descriptors, 4096, sizeof(io_uring_buf) * count_) != 0) return;
  br_ = static_cast<io_uring_buf_ring*>(descriptors);
  io_uring_buf_reg reg{};
  reg.ring_addr = reinterpret_cast<std::uint64_t>(br_);
  reg.ring_entries = count_;
  reg.bgid = group_;
  if (io_uring_register_buf_ring(&ring_, &reg, 0) != 0) return;
  registered_ = true;
  // Touched once here, on purpose. The kernel hands the buffers out round-robin,
  // so every buffer is used within a few hundred reads, and page k of one is
  // first written by the first read longer than k pages: left untouched, the
  // ring's pages fault in one by one over hours (each large read, HPACK bomb
  // or big report reaching a fresh page), and the RSS of a steady server
  // creeps up towards count × size per core instead of staying flat. Paying
  // it at startup makes RSS flat and keeps page faults off the read path.
  const std::size_t bytes = std::size_t{count_} * size_;
  memory_ = std::make_unique_for_overwrite<std::byte[]>(bytes);
  std::memset(memory_.get(), 0, bytes);
  io_uring_buf_ring_init(br_);
  const int mask = io_uring_buf_ring_mask(count_);
  for (std::uint16_t bid = 0; bid < count_; ++bid) {
    io_uring_buf_ring_add(br_, memory_.get() + std::size_t{bid} * size_, size_, bid, mask, bid);
  }
  io_uring_buf_ring_advance(br_, count_);
}

BufferRing::~BufferRing() {
  if (registered_) io_uring_unregister_buf_ring(&ring_, group_);
  std::free(br_);
}

std::span<const std::byte> BufferRing::view(std::uint16_t bid, std::size_t length) const {
  return {memory_.get() + std::size_t{bid} * size_, length};
}

void BufferRing::recycle(std::uint16_t bid) {
  io_uring_buf_ring_add(br_, memory_.get() + std::size_t{bid} * size_, size_, bid,
                        io_uring_buf_ring_mask(count_), 0);
  io_uring_buf_ring_advance(br_, 1);
}

}  // namespace ic::runtime
