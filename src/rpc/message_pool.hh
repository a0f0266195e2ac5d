#pragma once
// Reusable request messages, one pool per thread (per core) and message type.
// protobuf's Clear() keeps a message's repeated elements and the capacity of
// its strings (message_lite.h, RepeatedPtrField "cleared" elements), so
// parsing the next request into a recycled message reuses them: a
// LookupRouteRequest's block hashes (16+ bytes, past std::string's inline
// buffer) cost no allocation once the pool is warm. Bounded twice: at most
// kMaxPooled messages, and a message that parsed more than kMaxPooledWireBytes
// is freed instead of kept (the capacity it holds is proportional to its
// largest parse), so one large request never pins its memory.

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

  // A cleared message (recycled when one is pooled).
  std::unique_ptr<Message> take() {
    if (free_.empty()) return std::make_unique<Message>();
    std::unique_ptr<Message> m = std::move(free_.back());
    free_.pop_back();
    return m;
  }

  // Returns `m`, which last parsed `wire_bytes` bytes (0: none), to the pool,
  // or frees it when the pool is full or the message too large to keep.
  void give(std::unique_ptr<Message> m, std::size_t wire_bytes) {
    if (m == nullptr || free_.size() >= kMaxPooled || wire_bytes > kMaxPooledWireBytes) return;
    m->Clear();
    free_.push_back(std::move(m));
  }

  std::size_t pooled() const { return free_.size(); }

 private:
  std::vector<std::unique_ptr<Message>> free_;
};

// This thread's pool of `Message`s.
template <typename Message>
MessagePool<Message>& message_pool() {
  thread_local MessagePool<Message> pool;
  return pool;
}

}  // namespace ic::rpc
