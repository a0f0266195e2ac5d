#include "kvevents/sender.hh"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <chrono>

#include "common/channel.hh"
#include "config/log.hh"

namespace ic::tools::kvevents {

namespace v1 = inferencecache::v1alpha1;
using config::LogLevel;

struct Sender::Stream {
  grpc::ClientContext context;
  v1::Ack ack;
  std::unique_ptr<grpc::ClientWriter<v1::CacheStateUpdate>> writer;
};

namespace {

std::shared_ptr<grpc::Channel> make_channel(const std::string& server) {
  grpc::ChannelArguments args;
  // grpc's own reconnect backoff reaches 2 minutes; the adapter wants the server back soon.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  // A server that vanished without a FIN (host loss) is noticed by keepalive.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  return grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args);
}

std::chrono::system_clock::time_point after_ms(int ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}

}  // namespace

Sender::Sender(SenderOptions options, Counters& counters)
    : options_(std::move(options)),
      counters_(counters),
      channel_(make_channel(options_.server)),
      stub_(v1::InferenceCache::NewStub(channel_)) {}

Sender::~Sender() { stop(0); }

void Sender::start() {
  thread_ = std::thread([this] { run(); });
}

void Sender::stop(int grace_ms) {
  if (!thread_.joinable()) return;
  draining_ = true;
  {
    std::unique_lock lock(mutex_);
    not_full_.wait_for(lock, std::chrono::milliseconds(grace_ms),
                       [this] { return queue_.empty() || !connected_; });
  }
  stopping_ = true;
  not_empty_.notify_all();
  not_full_.notify_all();
  thread_.join();
  close_stream(true);
  wait_events_drained(grace_ms);
}

void Sender::push(Outbound message, std::size_t entries) {
  entries = entries == 0 ? 1 : entries;
  std::unique_lock lock(mutex_);
  not_full_.wait(lock, [&] {
    return !connected_ || stopping_ || queue_.empty() ||
           queued_entries_ + entries <= options_.max_queued_entries;
  });
  if (!connected_ || stopping_) {
    counters_.add(Metric::superseded_entries, entries);
    return;
  }
  queue_.push_back(Item{std::move(message), entries});
  queued_entries_ += entries;
  counters_.set(Metric::queue_depth, queued_entries_);
  not_empty_.notify_one();
}

void Sender::run() {
  int backoff = options_.backoff_initial_ms;
  while (!stopping_) {
    if (!connected_) {
      if (draining_ || !connect()) {
        if (!sleep_backoff(backoff)) break;
        backoff = std::min(backoff * 2, options_.backoff_max_ms);
        continue;
      }
      backoff = options_.backoff_initial_ms;
    }
    std::unique_lock lock(mutex_);
    not_empty_.wait_for(lock, std::chrono::milliseconds(100),
                        [this] { return !queue_.empty() || stopping_; });
    if (event_failed_.exchange(false)) {
      lock.unlock();
      fail("PublishEvent failed");
      continue;
    }
    if (queue_.empty()) {
      lock.unlock();
      // An idle stream writes nothing, so a server that died (or restarted, empty) would go
      // unnoticed until the next write: watch the connection instead.
      if (channel_->GetState(false) != GRPC_CHANNEL_READY) fail("connection to the server lost");
      continue;
    }
    Item item = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    const bool ok = send(item.message);
    lock.lock();
    queued_entries_ -= item.entries;
    counters_.set(Metric::queue_depth, queued_entries_);
    not_full_.notify_all();
    lock.unlock();
    if (!ok) fail("ReportCacheState stream broke");
  }
}

bool Sender::connect() {
  if (!channel_->WaitForConnected(after_ms(1000))) return false;
  stream_ = std::make_unique<Stream>();
  stream_->writer = stub_->ReportCacheState(&stream_->context, &stream_->ack);
  counters_.add(Metric::reconnects);
  counters_.set(Metric::stream_connected, 1);
  {
    std::lock_guard lock(mutex_);
    connected_ = true;
  }
  snapshot_requested_ = true;
  config::log(LogLevel::info, "connected to the InferenceCache server",
              {{"server", options_.server}});
  return true;
}

bool Sender::send(const Outbound& message) {
  if (const auto* update = std::get_if<v1::CacheStateUpdate>(&message)) {
    // A PublishEvent still in flight may not have reached the wire yet, and the stream write
    // could overtake it (an ALL_CLEARED landing after the adds that follow it would wipe them):
    // let every earlier event complete first. Events among themselves stay pipelined.
    {
      std::unique_lock lock(events_mutex_);
      events_cv_.wait(lock, [this] { return events_in_flight_ == 0; });
    }
    if (event_failed_ || !stream_ || !stream_->writer->Write(*update)) return false;
    counters_.add(Metric::updates_sent);
    counters_.add(Metric::prefix_entries_sent, static_cast<std::uint64_t>(update->prefixes_size()));
    if (update->has_stats()) counters_.add(Metric::stats_sent);
    return true;
  }
  return send_event(std::get<v1::CacheEvent>(message));
}

bool Sender::send_event(const v1::CacheEvent& event) {
  {
    std::unique_lock lock(events_mutex_);
    events_cv_.wait(lock, [this] { return events_in_flight_ < options_.max_events_in_flight; });
    ++events_in_flight_;
  }
  struct Call {
    grpc::ClientContext context;
    v1::CacheEvent event;
    v1::Ack ack;
  };
  auto* call = new Call;
  call->event = event;
  call->context.set_deadline(after_ms(options_.rpc_timeout_ms));
  stub_->async()->PublishEvent(
      &call->context, &call->event, &call->ack, [this, call](grpc::Status status) {
        if (status.ok()) {
          counters_.add(call->event.type() == v1::CacheEvent::ALL_CLEARED ? Metric::all_cleared_sent
                                                                          : Metric::evictions_sent);
        } else {
          event_failed_ = true;
        }
        delete call;
        std::lock_guard lock(events_mutex_);
        --events_in_flight_;
        events_cv_.notify_all();
      });
  return !event_failed_;
}

void Sender::fail(const std::string& why) {
  counters_.add(Metric::send_errors);
  {
    std::lock_guard lock(mutex_);
    connected_ = false;
    std::size_t dropped = queued_entries_;
    queue_.clear();
    queued_entries_ = 0;
    counters_.add(Metric::superseded_entries, dropped);
    counters_.set(Metric::queue_depth, 0);
  }
  not_full_.notify_all();
  counters_.set(Metric::stream_connected, 0);
  close_stream(false);
  event_failed_ = false;
  config::log(LogLevel::warn, "lost the InferenceCache server; reconnecting",
              {{"server", options_.server}, {"why", why}});
}

void Sender::close_stream(bool half_close) {
  if (!stream_) return;
  if (half_close) {
    stream_->writer->WritesDone();
  } else {
    stream_->context.TryCancel();
  }
  const grpc::Status status = stream_->writer->Finish();
  if (half_close && !status.ok()) {
    config::log(
        LogLevel::warn, "ReportCacheState ended with an error",
        {{"status", status_name(status.error_code())}, {"message", status.error_message()}});
  }
  stream_.reset();
}

void Sender::wait_events_drained(int timeout_ms) {
  std::unique_lock lock(events_mutex_);
  if (!events_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [this] { return events_in_flight_ == 0; })) {
    // Callbacks still reference this object: wait for them whatever the grace says.
    events_cv_.wait(lock, [this] { return events_in_flight_ == 0; });
  }
}

bool Sender::sleep_backoff(int ms) {
  std::unique_lock lock(mutex_);
  not_empty_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return stopping_.load(); });
  return !stopping_;
}

}  // namespace ic::tools::kvevents
