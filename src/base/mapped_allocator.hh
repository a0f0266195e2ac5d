#pragma once
// An allocator for buffers that grow large for a while and then go: blocks
// of kMappedBytes and more come straight from mmap(2) and go back with
// munmap(2) when freed, smaller ones from operator new (mimalloc).
//
// Why: mimalloc 2.0.9 (Debian 12) keeps a freed large span committed inside
// its live 32 MiB segment until that segment is used again, and mi_collect
// does not return it (docs/hostile-peers.md "Tests"). A never-reading
// subscriber's 1 MiB of unsent bytes, freed when it is ended, stayed resident
// that way after the burst that made it. Mapped blocks are the kernel's
// again at once. The cost: a block of kMappedBytes or more is fresh zeroed
// pages each time (mapped populated, MAP_POPULATE: one kernel pass instead of
// a fault per page), where mimalloc would hand back pages it keeps committed:
// on the 2-core VM here a 1 MiB map, fill and unmap cycle took ~370 µs
// populated (~700 µs faulting) against ~75 µs from mimalloc. Such blocks are
// a slow subscriber's backlog and unary answers of 256 KiB or more
// (RenderTemplate of ~100k tokens), both rare beside their own cost.
//
// Errors: std::bad_alloc when mmap fails, as operator new. A munmap that
// fails (ENOMEM: splitting a merged mapping at vm.max_map_count) releases
// the block's pages (MADV_DONTNEED) and leaves its address range mapped.

#include <sys/mman.h>

#include <cstddef>
#include <new>

namespace ic::base {

// Blocks from this size (bytes) on are mapped.
inline constexpr std::size_t kMappedBytes = 256 * 1024;

template <class T>
struct MappedAllocator {
  using value_type = T;

  MappedAllocator() = default;
  template <class U>
  MappedAllocator(const MappedAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kMappedBytes) return static_cast<T*>(::operator new(bytes));
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<T*>(p);
  }

  // `n` is what allocate() was given (the standard's allocator contract), so
  // the block's origin needs no header.
  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kMappedBytes) return ::operator delete(p);
    if (munmap(p, bytes) != 0) madvise(p, bytes, MADV_DONTNEED);
  }

  template <class U>
  bool operator==(const MappedAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace ic::base
