#pragma once
// StreamCacheEvents (docs/streams.md): every change an index shard applies,
// as CacheEvent messages, to any number of subscribers on any cores.
//
// Thread-per-core fan-out (docs/architecture.md rules 1, 5, 8):
//   - A subscription lives on its connection's core (the home core) and is
//     registered with the owner cores of the tenants it can see: the owner of
//     its tenant_id filter, or every core without one. Response headers go
//     out once every owner core has it, so a client that waits for them sees
//     every change applied afterwards.
//   - Each core's hub is its shard's ChangeSink only while it has at least one
//     subscription (index/change.hh): with none, ingest and sweeps pay one
//     null-pointer branch per change and lookups nothing.
//   - On the owner core a matching change is serialized once into a framed
//     message and appended to each matching subscription's batch; once per
//     loop turn (or each 64 KiB) the batches travel to their home cores over
//     the runtime's bounded mailboxes and are written to the stream as they are.
//   - Slow subscribers (docs/streams.md "Slow subscribers"): at most
//     EventStreamLimits::max_queued_bytes of events wait for the home core,
//     and the stream holds at most max_unsent_bytes the client has not taken;
//     past either bound the stream ends with RESOURCE_EXHAUSTED and all its
//     queued events are freed. Ingest and lookups never wait for a subscriber.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "index/change.hh"
#include "rpc/call.hh"
#include "sharding/sharded_index.hh"

namespace ic::service {

using sharding::ShardedIndex;  // the cross-core index (src/sharding/)

// Subscriber bounds (bytes of framed CacheEvent messages). One subscriber
// holds at most max_queued_bytes + max_unsent_bytes + 64 KiB per owner core
// (a batch being filled); the server at most max_subscriptions of those.
struct EventStreamLimits {
  // Events queued for one subscriber and not yet written to its stream:
  // batches posted to its home core plus the one being filled.
  std::size_t max_queued_bytes = 1024 * 1024;
  // Response bytes the subscriber's stream holds that the client has not
  // taken (HTTP/2 flow control window exhausted).
  std::size_t max_unsent_bytes = 1024 * 1024;
  // Open StreamCacheEvents calls; one more is RESOURCE_EXHAUSTED.
  std::size_t max_subscriptions = 128;
};

namespace detail {
struct Subscription;
class CoreHub;
}  // namespace detail

class EventFanout {
 public:
  // One hub per core of `index`; call before the cores serve. `index` (its
  // cores, shards and clock) outlives the fan-out.
  explicit EventFanout(ShardedIndex& index, EventStreamLimits limits = {});
  ~EventFanout();
  EventFanout(const EventFanout&) = delete;
  EventFanout& operator=(const EventFanout&) = delete;

  // Registers /inferencecache.v1alpha1.InferenceCache/StreamCacheEvents.
  void add_method(rpc::MethodTable& methods);

  // Subscriptions registered with core `core`'s hub (call on that core).
  std::size_t subscriptions(unsigned core) const;
  const EventStreamLimits& limits() const { return limits_; }

  // ---- used by the subscription's call handler (home core) ----
  // Starts delivering to `sub`'s call; called once, on the home core. False
  // (nothing started) when max_subscriptions are open.
  bool start(const std::shared_ptr<detail::Subscription>& sub);
  // Ends `sub`: finishes its call with `status` (if still open) and
  // unregisters it from its owner cores. Idempotent; on the home core.
  void end(const std::shared_ptr<detail::Subscription>& sub, const rpc::Status& status);

 private:
  friend class detail::CoreHub;
  // Home core: a batch of framed events from `owner` arrived.
  void deliver(const std::shared_ptr<detail::Subscription>& sub, std::string&& frames);
  // Home core: owner `owner` registered `sub`.
  void registered(const std::shared_ptr<detail::Subscription>& sub);

  ShardedIndex& index_;
  EventStreamLimits limits_;
  std::vector<std::unique_ptr<detail::CoreHub>> hubs_;
  std::atomic<std::size_t> active_{0};  // started, not ended subscriptions
};

}  // namespace ic::service
