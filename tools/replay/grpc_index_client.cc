#include "replay/grpc_index_client.hh"

#include <chrono>
#include <thread>

#include "common/channel.hh"

namespace ic::tools::replay {

namespace v1 = inferencecache::v1alpha1;

namespace {
// Events kept in flight at once: enough to hide loopback latency, bounded so a slow server
// applies backpressure instead of the replay growing memory.
constexpr int kMaxEventsInFlight = 512;

std::chrono::system_clock::time_point deadline_after(int ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}
}  // namespace

struct GrpcIndexClient::PendingEvent {
  grpc::ClientContext context;
  v1::CacheEvent event;
  v1::Ack ack;
};

GrpcIndexClient::GrpcIndexClient(std::shared_ptr<grpc::Channel> lookups,
                                 std::shared_ptr<grpc::Channel> ingest, int rpc_timeout_ms)
    : lookup_stub_(v1::InferenceCache::NewStub(lookups)),
      ingest_stub_(v1::InferenceCache::NewStub(ingest)),
      rpc_timeout_ms_(rpc_timeout_ms) {}

GrpcIndexClient::~GrpcIndexClient() {
  // Callbacks reference this object: never leave before the last one ran.
  std::unique_lock lock(mutex_);
  drained_.wait(lock, [this] { return events_in_flight_ == 0; });
  lock.unlock();
  for (auto& [key, stream] : streams_) {
    if (stream->writer) stream->context.TryCancel();
  }
}

LookupCall GrpcIndexClient::lookup(const v1::LookupRouteRequest& request,
                                   v1::LookupRouteResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(deadline_after(rpc_timeout_ms_));
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status status = lookup_stub_->LookupRoute(&context, request, response);
  const auto end = std::chrono::steady_clock::now();
  LookupCall call;
  call.ok = status.ok();
  call.status = status_name(status.error_code());
  call.latency_us = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(end - start).count());
  return call;
}

LookupCall GrpcIndexClient::lookup_pd(const v1::LookupPDRouteRequest& request,
                                      v1::LookupPDRouteResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(deadline_after(rpc_timeout_ms_));
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status status = lookup_stub_->LookupPDRoute(&context, request, response);
  const auto end = std::chrono::steady_clock::now();
  LookupCall call;
  call.ok = status.ok();
  call.status = status_name(status.error_code());
  call.latency_us = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(end - start).count());
  return call;
}

bool GrpcIndexClient::report(std::size_t stream_key, const v1::CacheStateUpdate& update,
                             std::string* error) {
  auto& slot = streams_[stream_key];
  if (!slot) {
    slot = std::make_unique<Stream>();
    slot->writer = ingest_stub_->ReportCacheState(&slot->context, &slot->ack);
  }
  if (slot->writer->Write(update)) return true;
  const grpc::Status status = slot->writer->Finish();
  *error = "ReportCacheState stream for " + update.replica_id() +
           " broke: " + status_name(status.error_code()) + " " + status.error_message();
  slot->writer.reset();
  streams_.erase(stream_key);
  return false;
}

void GrpcIndexClient::publish(const v1::CacheEvent& event) {
  {
    std::unique_lock lock(mutex_);
    drained_.wait(lock, [this] { return events_in_flight_ < kMaxEventsInFlight; });
    ++events_in_flight_;
  }
  auto* pending = new PendingEvent;
  pending->event = event;
  pending->context.set_deadline(deadline_after(rpc_timeout_ms_));
  ingest_stub_->async()->PublishEvent(
      &pending->context, &pending->event, &pending->ack, [this, pending](grpc::Status status) {
        std::lock_guard lock(mutex_);
        if (!status.ok() || !pending->ack.accepted()) {
          if (failed_events_++ == 0) {
            first_event_error_ = "PublishEvent: " + status_name(status.error_code()) + " " +
                                 status.error_message() + " reason=" + pending->ack.reason_code();
          }
        }
        delete pending;
        --events_in_flight_;
        drained_.notify_all();
      });
}

bool GrpcIndexClient::finish(std::string* error) {
  bool ok = true;
  // A server that stopped answering must not hang the tool: cancel whatever is still open
  // after a few call timeouts (TryCancel is thread-safe).
  std::mutex watchdog_mutex;
  std::condition_variable watchdog_cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock lock(watchdog_mutex);
    if (watchdog_cv.wait_for(lock, std::chrono::milliseconds(5 * rpc_timeout_ms_),
                             [&] { return done; })) {
      return;
    }
    for (auto& [key, stream] : streams_) stream->context.TryCancel();
  });
  for (auto& [key, stream] : streams_) {
    if (!stream->writer) continue;
    stream->writer->WritesDone();
    const grpc::Status status = stream->writer->Finish();
    stream->writer.reset();
    if (ok && (!status.ok() || !stream->ack.accepted())) {
      ok = false;
      *error = "ReportCacheState: " + status_name(status.error_code()) + " " +
               status.error_message() + " reason=" + stream->ack.reason_code();
    }
  }
  {
    std::lock_guard lock(watchdog_mutex);
    done = true;
  }
  watchdog_cv.notify_all();
  watchdog.join();
  streams_.clear();
  std::unique_lock lock(mutex_);
  drained_.wait(lock, [this] { return events_in_flight_ == 0; });
  if (ok && failed_events_ > 0) {
    ok = false;
    *error = std::to_string(failed_events_) + " events failed, first: " + first_event_error_;
  }
  return ok;
}

std::int64_t GrpcIndexClient::failed_events() const {
  std::lock_guard lock(mutex_);
  return failed_events_;
}

}  // namespace ic::tools::replay
