#pragma once
// Reusable request messages, one pool per thread (per core) and message type.
// protobuf's Clear() keeps a message's repeated elements and the capacity of
// its strings (message_lite.h, RepeatedPtrField "cleared" elements), so
// parsing the next request into a recycled message reuses them: a
// LookupRouteRequest's block hashes (16+ bytes, past std::string's inline
// buffer) cost no allocation once the pool is warm. Bounded three times: at
// most kMaxPooled messages; a message that parsed more than
// kMaxPooledWireBytes is freed instead of kept (one large request never pins
// its memory); and a message is freed once the requests parsed into it add up
// to kMaxAbsorbedWireBytes. The last bound is what caps a kept message's
// storage: Clear keeps each cleared string's capacity, so small requests
// alone can pile it up (one with k empty block hashes and then a 4 KB one
// grows the (k+1)-th kept string; 2,000 of them made one message keep 4 MB,
// docs/hostile-peers.md "Reused state"). A parse grows strings and arrays by
// at most twice its wire bytes (capacity doubles), and the kept elements
// number at most what one parse of kMaxPooledWireBytes creates (~2,000 of
// ~40 bytes), so a kept message holds at most about
// 80 KB + 2 x kMaxAbsorbedWireBytes.

#include <cstddef>
#include <memory>
#include <vector>

namespace ic::rpc {

template <typename Message>
class MessagePool {
 public:
  // Messages kept per thread: more than the calls one connection pumps per
  // turn, so a saturated core parses into recycled messages only.
  static constexpr std::size_t kMaxPooled = 64;
  // Largest parsed message (wire bytes) whose storage is worth keeping.
  static constexpr std::size_t kMaxPooledWireBytes = 4096;

  // Wire bytes parsed into one message, over all its uses, after which it
  // is freed rather than kept (~80 parses of a 200-byte LookupRoute).
  static constexpr std::size_t kMaxAbsorbedWireBytes = 16384;

  // A message taken from the pool, and the wire bytes parsed into it so far.
  struct Lease {
    std::unique_ptr<Message> message;
    std::size_t absorbed = 0;
  };

  // A cleared message (recycled when one is pooled; absorbed 0 when new).
  Lease take() {
    if (free_.empty()) return Lease{std::make_unique<Message>(), 0};
    Lease lease = std::move(free_.back());
    free_.pop_back();
    return lease;
  }

  // Returns `lease`, whose message last parsed `wire_bytes` bytes (0: none),
  // to the pool, or frees it when the pool is full, the message too large to
  // keep, or its parses add up to kMaxAbsorbedWireBytes.
  void give(Lease lease, std::size_t wire_bytes) {
    lease.absorbed += wire_bytes;
    if (lease.message == nullptr || free_.size() >= kMaxPooled ||
        wire_bytes > kMaxPooledWireBytes || lease.absorbed > kMaxAbsorbedWireBytes)
      return;
    lease.message->Clear();
    free_.push_back(std::move(lease));
  }

  std::size_t pooled() const { return free_.size(); }

 private:
  std::vector<Lease> free_;
};

// This thread's pool of `Message`s.
template <typename Message>
MessagePool<Message>& message_pool() {
  thread_local MessagePool<Message> pool;
  return pool;
}

}  // namespace ic::rpc
