#include "service/health.hh"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grpc/health/v1/health.pb.h"
#include "rpc/typed.hh"

namespace ic::service {
namespace {

namespace hpb = ::grpc::health::v1;
using Status = hpb::HealthCheckResponse::ServingStatus;

bool is_served(const std::string& service) {
  return service.empty() || service == "inferencecache.v1alpha1.InferenceCache" ||
         service == "liveness" || service == "readiness" ||
         service == "envoy.service.ext_proc.v3.ExternalProcessor";
}

// "liveness" is SERVING while the process answers at all (the Endpoint
// Picker Protocol's health names; docs/gateway.md "Health"); every other
// name follows readiness.
Status current(const ReadyFn& ready, const std::string& service) {
  if (service == "liveness") return hpb::HealthCheckResponse::SERVING;
  return (!ready || ready()) ? hpb::HealthCheckResponse::SERVING
                             : hpb::HealthCheckResponse::NOT_SERVING;
}

class WatchHandler;

// The open Watch streams of one core and the one poll timer they share,
// armed only while there is at least one.
class WatchHub {
 public:
  WatchHub(ReadyFn ready, rpc::Timers& timers) : ready_(std::move(ready)), timers_(timers) {}
  ~WatchHub() {
    if (timer_) timers_.cancel_timer(*timer_);
  }
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  Status status(const std::string& service) const { return current(ready_, service); }
  void add(WatchHandler* w) {
    watchers_.push_back(w);
    if (!timer_ && ready_) arm();
  }
  void remove(WatchHandler* w) {
    watchers_.erase(std::remove(watchers_.begin(), watchers_.end(), w), watchers_.end());
    if (watchers_.empty() && timer_) {
      timers_.cancel_timer(*timer_);
      timer_.reset();
    }
  }

 private:
  void arm() {
    timer_ = timers_.add_timer(kWatchPollUs, [this] { tick(); });
  }
  void tick();

  ReadyFn ready_;
  rpc::Timers& timers_;
  std::vector<WatchHandler*> watchers_;
  std::optional<rpc::Timers::TimerId> timer_;
};

// Watch: the status now, then each change, until the client leaves or the
// server drains.
class WatchHandler final : public rpc::CallHandler {
 public:
  WatchHandler(rpc::CallHandle call, std::shared_ptr<WatchHub> hub)
      : call_(std::move(call)), hub_(std::move(hub)) {}
  ~WatchHandler() override { hub_->remove(this); }

  void on_message(std::span<const std::byte> message) override {
    if (have_request_) {
      call_.finish({rpc::StatusCode::kInternal, "Watch takes one request"});
      return;
    }
    hpb::HealthCheckRequest request;
    if (!rpc::parse_request(message, request, call_)) return;
    have_request_ = true;
    if (!is_served(request.service())) {
      send(hpb::HealthCheckResponse::SERVICE_UNKNOWN);
      return;
    }
    liveness_ = request.service() == "liveness";
    send(hub_->status(request.service()));
    if (!liveness_) hub_->add(this);  // liveness never changes while serving
  }
  // The client's half-close does not end a watch (health-checking.md).
  void on_half_close() override {
    if (!have_request_) call_.finish({rpc::StatusCode::kInternal, "no request message"});
  }
  void on_cancel() override { hub_->remove(this); }
  void on_shutdown() override {
    hub_->remove(this);
    if (last_ != hpb::HealthCheckResponse::NOT_SERVING) send(hpb::HealthCheckResponse::NOT_SERVING);
    call_.finish(rpc::Status::ok());
  }
  // Sends `status` if it differs from the last one sent.
  void update(Status status) {
    if (status != last_) send(status);
  }

 private:
  void send(Status status) {
    last_ = status;
    hpb::HealthCheckResponse response;
    response.set_status(status);
    call_.write(response);
  }

  rpc::CallHandle call_;
  std::shared_ptr<WatchHub> hub_;
  Status last_ = hpb::HealthCheckResponse::UNKNOWN;
  bool have_request_ = false;
  bool liveness_ = false;
};

void WatchHub::tick() {
  timer_.reset();
  const Status now = status("");
  // update() may end a call, which never removes other watchers.
  for (WatchHandler* w : std::vector<WatchHandler*>(watchers_)) w->update(now);
  if (!watchers_.empty()) arm();
}

}  // namespace

void add_health(rpc::MethodTable& methods, ReadyFn ready, rpc::Timers& timers) {
  methods.add(
      "/grpc.health.v1.Health/Check",
      rpc::single_request_method<hpb::HealthCheckRequest>(
          rpc::CallKind::kUnary, [ready](rpc::CallHandle call, hpb::HealthCheckRequest&& request) {
            if (!is_served(request.service())) {
              call.finish({rpc::StatusCode::kNotFound, "unknown service " + request.service()});
              return;
            }
            hpb::HealthCheckResponse response;
            response.set_status(current(ready, request.service()));
            call.reply(response);
          }));
  auto hub = std::make_shared<WatchHub>(std::move(ready), timers);
  rpc::Method watch;
  watch.kind = rpc::CallKind::kServerStreaming;
  watch.make = [hub](rpc::CallHandle call) -> std::unique_ptr<rpc::CallHandler> {
    return std::make_unique<WatchHandler>(std::move(call), hub);
  };
  methods.add("/grpc.health.v1.Health/Watch", std::move(watch));
}

}  // namespace ic::service
