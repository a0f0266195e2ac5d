// What a pooled request message keeps (docs/hostile-peers.md "Reused state").
// protobuf's Clear keeps a message's cleared repeated elements and each
// string's capacity, so a message that only ever parsed small requests can
// still pile up storage: a request with k empty strings then one of ~4 KB
// grows the (k+1)-th kept string to 4 KB, and the next request, with k+1
// empty strings, the one after it. Every such request is under
// MessagePool::kMaxPooledWireBytes; 2,000 of them on one connection made one
// pooled message hold ~4 MB.

#include <doctest/doctest.h>
#include <google/protobuf/field_mask.pb.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "rpc/message_pool.hh"

using google::protobuf::FieldMask;
using Pool = ic::rpc::MessagePool<FieldMask>;

namespace {

// A FieldMask of `empty` empty paths then one path filling the message up to
// `wire_bytes` on the wire.
std::string staircase_step(int empty, std::size_t wire_bytes) {
  FieldMask m;
  for (int i = 0; i < empty; ++i) m.add_paths();
  const std::size_t used = m.ByteSizeLong() + 3;  // the last path's tag and 2-byte length
  m.add_paths(std::string(wire_bytes - used, 'h'));
  std::string out = m.SerializeAsString();
  REQUIRE(out.size() == wire_bytes);
  return out;
}

}  // namespace

TEST_SUITE("hostile") {
  TEST_CASE("a pooled message that parsed only small requests keeps a bounded amount") {
    Pool pool;
    std::size_t recycled = 0;
    std::size_t most_kept = 0;        // bytes a recycled message held when taken
    for (int k = 0; k < 1900; ++k) {  // the last path stays over 127 bytes
      Pool::Lease lease = pool.take();
      if (lease.absorbed > 0) {
        ++recycled;
        // SpaceUsedLong counts the cleared elements and the strings' capacity.
        most_kept = std::max<std::size_t>(most_kept, lease.message->SpaceUsedLong());
      }
      const std::string wire = staircase_step(k, Pool::kMaxPooledWireBytes - 4);
      REQUIRE(lease.message->ParseFromString(wire));
      pool.give(std::move(lease), wire.size());
    }
    CHECK(recycled >= 1000);  // the pool still recycles these requests
    CHECK(most_kept <= 256 * 1024);
  }

  TEST_CASE("small requests keep reusing one message until their bytes add up") {
    Pool pool;
    const std::string wire = staircase_step(0, 200);
    Pool::Lease lease = pool.take();
    std::size_t reused = 0;
    for (int i = 0; i < 1000; ++i) {
      REQUIRE(lease.message->ParseFromString(wire));
      pool.give(std::move(lease), wire.size());
      lease = pool.take();
      if (lease.absorbed == 0) break;  // a fresh message
      CHECK(lease.absorbed == (reused + 1) * wire.size());
      ++reused;
    }
    // Recycled for Pool::kMaxAbsorbedWireBytes of parsing, then replaced.
    CHECK(reused == Pool::kMaxAbsorbedWireBytes / wire.size());
  }
}
