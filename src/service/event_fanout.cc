#include "service/event_fanout.hh"

#include <google/protobuf/message_lite.h>

#include <atomic>
#include <string>

#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "rpc/framing.hh"
#include "rpc/typed.hh"
#include "service/inference_cache.hh"

namespace ic::service {

namespace pb = ::inferencecache::v1alpha1;

namespace {
// Framed bytes after which a batch leaves at once instead of at the end of
// the loop turn.
constexpr std::size_t kBatchBytes = 64 * 1024;
}  // namespace

namespace detail {

// One StreamCacheEvents call. Shared by its home core (the handler) and its
// owner cores (hub slots, tasks in flight); the fields marked "home" are
// touched only on the home core.
struct Subscription {
  // Immutable once started.
  std::string tenant_id;        // "" = every tenant
  std::string model_id;         // "" = every model
  std::uint32_t type_mask = 0;  // bit t: index::ChangeType t is wanted
  unsigned home = 0;
  std::vector<unsigned> owners;
  rpc::CallHandle call;  // home

  unsigned pending_registrations = 0;  // home
  bool started = false;                // home: counted in EventFanout::active_
  bool ended = false;                  // home
  // Set by the home core when the call ends and by an owner core on
  // overflow; owners skip a closed subscription until its removal arrives.
  std::atomic<bool> closed{false};
  // Framed bytes posted to the home core by any owner, not yet written.
  std::atomic<std::size_t> in_flight{0};

  bool matches(const index::Change& c) const {
    if ((type_mask & (1u << static_cast<unsigned>(c.type))) == 0) return false;
    if (!tenant_id.empty() && c.tenant_id != tenant_id) return false;
    return model_id.empty() || c.model_id == model_id;
  }
};

// One core's side of the fan-out: the subscriptions whose changes this core's
// shard makes, and their batches. Touched only on its core.
class CoreHub final : public index::ChangeSink {
 public:
  CoreHub(EventFanout& fanout, unsigned core) : fanout_(fanout), core_(core) {}

  void add(std::shared_ptr<Subscription> sub) {
    if (sub->closed.load(std::memory_order_acquire)) return;  // ended before it got here
    if (slots_.empty()) fanout_.index_.set_change_sink(core_, this);
    slots_.push_back({std::move(sub), {}});
  }

  void remove(const Subscription* sub) {
    for (std::size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].sub.get() != sub) continue;
      slots_[i] = std::move(slots_.back());
      slots_.pop_back();
      break;
    }
    if (slots_.empty()) fanout_.index_.set_change_sink(core_, nullptr);
  }

  std::size_t size() const { return slots_.size(); }

  void on_change(const index::Change& c) override {
    bool framed = false;
    for (Slot& slot : slots_) {
      Subscription& sub = *slot.sub;
      if (sub.closed.load(std::memory_order_relaxed) || !sub.matches(c)) continue;
      if (!framed) {
        frame(c);
        framed = true;
      }
      const std::size_t queued = slot.batch.size() + sub.in_flight.load(std::memory_order_relaxed);
      if (queued + frame_.size() > fanout_.limits_.max_queued_bytes) {
        overflow(slot);
        continue;
      }
      slot.batch += frame_;
      // A burst inside one loop turn travels in batch-sized pieces.
      if (slot.batch.size() >= kBatchBytes && post(slot)) continue;
      schedule_flush();
    }
  }

 private:
  struct Slot {
    std::shared_ptr<Subscription> sub;
    std::string batch;  // framed events not yet posted to the home core
  };

  // Serializes `c` once, framed, into frame_ (reused: no allocation once warm).
  void frame(const index::Change& c) {
    event_.set_type(static_cast<pb::CacheEvent::Type>(c.type));
    event_.mutable_replica_id()->assign(c.replica_id);
    event_.mutable_model_id()->assign(c.model_id);
    event_.mutable_tenant_id()->assign(c.tenant_id);
    event_.mutable_prefix_hash()->assign(c.prefix_hash);
    event_.mutable_adapter_id()->assign(c.adapter_id);
    event_.set_timestamp_us(c.timestamp_us != 0 ? c.timestamp_us
                                                : fanout_.index_.clock().wall_us());
    const std::size_t size = event_.ByteSizeLong();
    frame_.clear();
    rpc::append_frame_header(frame_, static_cast<std::uint32_t>(size));
    frame_.resize(rpc::kFrameHeaderBytes + size);
    event_.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(frame_.data()) +
                                           rpc::kFrameHeaderBytes);
  }

  // The subscriber fell behind its bound: stop queueing for it, free what it
  // holds here, and have its home core end the call.
  void overflow(Slot& slot) {
    slot.sub->closed.store(true, std::memory_order_release);
    std::string().swap(slot.batch);
    const std::string why = "event subscriber too slow: more than " +
                            std::to_string(fanout_.limits_.max_queued_bytes) +
                            " bytes of events queued";
    EventFanout* f = &fanout_;
    runtime::submit_later(fanout_.index_.cores(), slot.sub->home, [f, sub = slot.sub, why] {
      f->end(sub, {rpc::StatusCode::kResourceExhausted, why});
    });
  }

  void schedule_flush() {
    if (flush_armed_) return;
    flush_armed_ = true;
    fanout_.index_.cores().timers().add_timer(0, [this] { flush(); });
  }

  // Posts the slot's batch to its home core; false (batch kept, still
  // counted against the bound) when that mailbox is full.
  bool post(Slot& slot) {
    const std::size_t n = slot.batch.size();
    slot.sub->in_flight.fetch_add(n, std::memory_order_relaxed);
    auto refused = runtime::try_submit_later(fanout_.index_.cores(), slot.sub->home,
                                             Batch{&fanout_, slot.sub, std::move(slot.batch)});
    slot.batch.clear();
    if (!refused) return true;
    slot.sub->in_flight.fetch_sub(n, std::memory_order_relaxed);
    slot.batch = std::move(refused->frames);
    return false;
  }

  // Once per loop turn: one task per subscription with a batch; a full
  // mailbox keeps the batch here and retries shortly.
  void flush() {
    flush_armed_ = false;
    bool retry = false;
    for (Slot& slot : slots_) {
      if (slot.batch.empty()) continue;
      if (slot.sub->closed.load(std::memory_order_relaxed)) {
        std::string().swap(slot.batch);  // ended meanwhile: its removal is on its way
        continue;
      }
      if (!post(slot)) retry = true;
    }
    if (retry) {
      flush_armed_ = true;
      fanout_.index_.cores().timers().add_timer(runtime::Wait{}.retry_us, [this] { flush(); });
    }
  }

  struct Batch {
    EventFanout* fanout;
    std::shared_ptr<Subscription> sub;
    std::string frames;
    void operator()() { fanout->deliver(sub, std::move(frames)); }
  };

  EventFanout& fanout_;
  unsigned core_;
  std::vector<Slot> slots_;
  pb::CacheEvent event_;
  std::string frame_;
  bool flush_armed_ = false;
};

}  // namespace detail

namespace {

using detail::Subscription;

// Every CacheEvent.Type the index reports (bits 1..4).
constexpr std::uint32_t kAllTypes = 0b11110;

// The type filter as a bit mask; 0 when `types` names no known type.
std::uint32_t type_mask(const pb::StreamEventsRequest& request) {
  if (request.types_size() == 0) return kAllTypes;
  std::uint32_t mask = 0;
  for (const int t : request.types()) {
    if (t >= 1 && t <= 4) mask |= 1u << t;
  }
  return mask;
}

// A StreamCacheEvents call: one request, then events until the client
// leaves, the server drains, or the subscriber overflows its bound.
class StreamEventsHandler final : public rpc::CallHandler {
 public:
  StreamEventsHandler(rpc::CallHandle call, EventFanout& fanout, ShardedIndex& index)
      : call_(std::move(call)), fanout_(fanout), index_(index) {}

  void on_message(std::span<const std::byte> message) override {
    if (have_request_) {
      call_.finish({rpc::StatusCode::kInternal, "StreamCacheEvents takes one request"});
      return;
    }
    have_request_ = rpc::parse_request(message, request_, call_);
  }

  void on_half_close() override {
    if (!have_request_) {
      call_.finish({rpc::StatusCode::kInternal, "no request message before half-close"});
      return;
    }
    const std::uint32_t mask = type_mask(request_);
    if (mask == 0) {
      call_.finish({rpc::StatusCode::kInvalidArgument,
                    "types names no known CacheEvent.Type (PREFIX_ADDED, PREFIX_EVICTED, "
                    "REPLICA_UPDATED, ALL_CLEARED)"});
      return;
    }
    const unsigned cores = index_.cores().cores();
    sub_ = std::make_shared<Subscription>();
    sub_->tenant_id = request_.tenant_id();
    sub_->model_id = request_.model_id();
    sub_->type_mask = mask;
    sub_->home = index_.cores().current_core();
    sub_->call = call_;
    if (!sub_->tenant_id.empty()) {
      sub_->owners.push_back(index_.owner(sub_->tenant_id));
    } else {
      for (unsigned c = 0; c < cores; ++c) sub_->owners.push_back(c);
    }
    if (!fanout_.start(sub_)) {
      sub_.reset();
      call_.finish({rpc::StatusCode::kResourceExhausted,
                    "too many event subscribers (max " +
                        std::to_string(fanout_.limits().max_subscriptions) + ")"});
    }
  }

  void on_cancel() override {
    if (sub_) fanout_.end(sub_, {rpc::StatusCode::kCancelled, "call ended"});
  }

  // Draining: the stream ends with OK so the connection can close.
  void on_shutdown() override {
    if (sub_) {
      fanout_.end(sub_, rpc::Status::ok());
    } else {
      call_.finish(rpc::Status::ok());
    }
  }

 private:
  rpc::CallHandle call_;
  EventFanout& fanout_;
  ShardedIndex& index_;
  pb::StreamEventsRequest request_;
  bool have_request_ = false;
  std::shared_ptr<Subscription> sub_;
};

}  // namespace

EventFanout::EventFanout(ShardedIndex& index, EventStreamLimits limits)
    : index_(index), limits_(limits) {
  for (unsigned c = 0; c < index.cores().cores(); ++c) {
    hubs_.push_back(std::make_unique<detail::CoreHub>(*this, c));
  }
}

EventFanout::~EventFanout() = default;

void EventFanout::add_method(rpc::MethodTable& methods) {
  rpc::Method m;
  m.kind = rpc::CallKind::kServerStreaming;
  m.make = [this](rpc::CallHandle call) -> std::unique_ptr<rpc::CallHandler> {
    return std::make_unique<StreamEventsHandler>(std::move(call), *this, index_);
  };
  methods.add("/" + std::string(kInferenceCacheService) + "/StreamCacheEvents", std::move(m));
}

std::size_t EventFanout::subscriptions(unsigned core) const { return hubs_[core]->size(); }

bool EventFanout::start(const std::shared_ptr<Subscription>& sub) {
  if (active_.fetch_add(1, std::memory_order_relaxed) >= limits_.max_subscriptions) {
    active_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  sub->started = true;
  sub->pending_registrations = static_cast<unsigned>(sub->owners.size());
  for (const unsigned owner : sub->owners) {
    detail::CoreHub* hub = hubs_[owner].get();
    runtime::submit_later(index_.cores(), owner, [this, hub, sub] {
      hub->add(sub);
      runtime::submit_later(index_.cores(), sub->home, [this, sub] { registered(sub); });
    });
  }
  return true;
}

void EventFanout::registered(const std::shared_ptr<Subscription>& sub) {
  if (--sub->pending_registrations == 0 && !sub->ended) sub->call.send_headers();
}

void EventFanout::end(const std::shared_ptr<Subscription>& sub, const rpc::Status& status) {
  if (sub->ended) return;
  sub->ended = true;
  if (sub->started) active_.fetch_sub(1, std::memory_order_relaxed);
  sub->closed.store(true, std::memory_order_release);
  sub->call.finish(status);
  for (const unsigned owner : sub->owners) {
    detail::CoreHub* hub = hubs_[owner].get();
    runtime::submit_later(index_.cores(), owner, [hub, sub] { hub->remove(sub.get()); });
  }
}

void EventFanout::deliver(const std::shared_ptr<Subscription>& sub, std::string&& frames) {
  if (!sub->ended) {
    sub->call.write_frames(std::as_bytes(std::span(frames.data(), frames.size())));
    if (sub->call.unsent_bytes() > limits_.max_unsent_bytes) {
      end(sub, {rpc::StatusCode::kResourceExhausted, "event subscriber too slow: more than " +
                                                         std::to_string(limits_.max_unsent_bytes) +
                                                         " bytes unread"});
    }
  }
  sub->in_flight.fetch_sub(frames.size(), std::memory_order_relaxed);
}

}  // namespace ic::service
