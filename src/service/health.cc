#include "service/health.hh"

#include <memory>
#include <string>

#include "grpc/health/v1/health.pb.h"
#include "grpc/typed.hh"

namespace ic::service {
namespace {

namespace hpb = ::grpc::health::v1;

bool is_served(const std::string& service) {
  return service.empty() || service == "inferencecache.v1alpha1.InferenceCache";
}

hpb::HealthCheckResponse::ServingStatus current(const ReadyFn& ready) {
  return (!ready || ready()) ? hpb::HealthCheckResponse::SERVING
                             : hpb::HealthCheckResponse::NOT_SERVING;
}

// Watch: one status now, then the stream stays until shutdown.
class WatchHandler final : public grpc::CallHandler {
 public:
  WatchHandler(grpc::CallHandle call, ReadyFn ready)
      : call_(std::move(call)), ready_(std::move(ready)) {}

  void on_message(std::span<const std::byte> message) override {
    if (have_request_) {
      call_.finish({grpc::StatusCode::kInternal, "Watch takes one request"});
      return;
    }
    hpb::HealthCheckRequest request;
    if (!grpc::parse_request(message, request, call_)) return;
    have_request_ = true;
    hpb::HealthCheckResponse response;
    response.set_status(is_served(request.service()) ? current(ready_)
                                                     : hpb::HealthCheckResponse::SERVICE_UNKNOWN);
    call_.write(response);
  }
  // The client's half-close does not end a watch (health-checking.md).
  void on_half_close() override {
    if (!have_request_) call_.finish({grpc::StatusCode::kInternal, "no request message"});
  }
  void on_shutdown() override {
    hpb::HealthCheckResponse response;
    response.set_status(hpb::HealthCheckResponse::NOT_SERVING);
    call_.write(response);
    call_.finish(grpc::Status::ok());
  }

 private:
  grpc::CallHandle call_;
  ReadyFn ready_;
  bool have_request_ = false;
};

}  // namespace

void add_health(grpc::MethodTable& methods, ReadyFn ready) {
  methods.add(
      "/grpc.health.v1.Health/Check",
      grpc::single_request_method<hpb::HealthCheckRequest>(
          grpc::CallKind::kUnary,
          [ready](grpc::CallHandle call, hpb::HealthCheckRequest&& request) {
            if (!is_served(request.service())) {
              call.finish({grpc::StatusCode::kNotFound, "unknown service " + request.service()});
              return;
            }
            hpb::HealthCheckResponse response;
            response.set_status(current(ready));
            call.reply(response);
          }));
  grpc::Method watch;
  watch.kind = grpc::CallKind::kServerStreaming;
  watch.make = [ready](grpc::CallHandle call) -> std::unique_ptr<grpc::CallHandler> {
    return std::make_unique<WatchHandler>(std::move(call), ready);
  };
  methods.add("/grpc.health.v1.Health/Watch", std::move(watch));
}

}  // namespace ic::service
