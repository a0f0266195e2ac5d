#include "service/grpc_server.hh"

#include <google/protobuf/stubs/logging.h>

#include <mutex>

#include "service/event_fanout.hh"
#include "service/inference_cache.hh"
#include "service/reflection.hh"

namespace ic::service {

CoreGrpcServer::CoreGrpcServer(const GrpcServiceOptions& options, rpc::Timers& timers) {
  context_.timers = &timers;
  build(options);
}

CoreGrpcServer::~CoreGrpcServer() = default;

void CoreGrpcServer::build(const GrpcServiceOptions& options) {
  // protobuf writes an ERROR line to stderr for every request string field
  // that is not valid UTF-8 (the parse still fails → INVALID_ARGUMENT). A peer
  // could make every reactor block on stderr that way: drop those logs.
  static std::once_flag quiet;
  std::call_once(quiet, [] { google::protobuf::SetLogHandler(nullptr); });
  if (options.inference_cache)
    add_inference_cache(methods_, options.index, options.prompt_text, options.prompt_scheduler);
  if (options.events != nullptr) options.events->add_method(methods_);
  if (options.scrape_metrics) {
    static MetricSubscribers process_wide;
    add_metric_stream(
        methods_, options.scrape_metrics, options.metrics_interval_us, *context_.timers,
        options.metric_subscribers != nullptr ? *options.metric_subscribers : process_wide);
  }
  if (options.add_methods) options.add_methods(methods_, *context_.timers);
  add_health(methods_, options.ready, *context_.timers);
  add_reflection(methods_);
  context_.methods = &methods_;
  context_.options = options.grpc;
}

net::SessionFactory CoreGrpcServer::session_factory() {
  return [this](net::Connection& connection) { return make_session(connection); };
}

std::unique_ptr<net::Session> CoreGrpcServer::make_session(net::Connection& connection) {
  return rpc::make_server_session(connection, context_);
}

}  // namespace ic::service
