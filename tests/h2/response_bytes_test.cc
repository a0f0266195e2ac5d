// h2::ResponseBytes (base/mapped_allocator.hh): a buffer of 256 KiB or more is
// a mapping of its own, gone from the address space when freed; a smaller one
// is an ordinary allocation.

#include <doctest/doctest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "h2/server_session.hh"

namespace {

using ic::h2::ResponseBytes;

// Whether the page holding address `at` is mapped: mincore(2) fails with
// ENOMEM where no mapping covers it. (An address, not a pointer: the block
// may have been freed.)
bool mapped(std::uintptr_t at) {
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  auto* start = reinterpret_cast<void*>(at & ~(page - 1));
  unsigned char resident = 0;
  if (mincore(start, 1, &resident) == 0) return true;
  REQUIRE(errno == ENOMEM);
  return false;
}

}  // namespace

TEST_CASE("a response buffer of 256 KiB or more is unmapped when freed, every page of it") {
  std::uintptr_t first = 0, last = 0;
  {
    ResponseBytes big(ic::base::kMappedBytes, 'x');
    first = reinterpret_cast<std::uintptr_t>(big.data());
    last = first + ic::base::kMappedBytes;  // the terminating NUL's page
    CHECK(big[ic::base::kMappedBytes - 1] == 'x');
    CHECK(mapped(first));
    CHECK(mapped(last));
  }
  CHECK_FALSE(mapped(first));
  CHECK_FALSE(mapped(last));
}

TEST_CASE("a response buffer that grows past 256 KiB keeps its bytes and frees each block") {
  ResponseBytes b;
  for (int i = 0; i < 600; ++i) b.append(1000, static_cast<char>('a' + i % 26));
  REQUIRE(b.size() == 600'000);
  CHECK(b[0] == 'a');
  CHECK(b[599'999] == static_cast<char>('a' + 599 % 26));
  const auto first = reinterpret_cast<std::uintptr_t>(b.data());
  const auto last = first + b.capacity();
  ResponseBytes().swap(b);
  CHECK_FALSE(mapped(first));
  CHECK_FALSE(mapped(last));
}

TEST_CASE("a small response buffer comes from the heap") {
  std::uintptr_t at = 0;
  {
    ResponseBytes small(1000, 'y');
    at = reinterpret_cast<std::uintptr_t>(small.data());
  }
  // Freed to the allocator, which keeps the page mapped.
  CHECK(mapped(at));
}
