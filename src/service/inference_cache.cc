#include "service/inference_cache.hh"

#include <memory>
#include <string>

#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "metrics/registry.hh"
#include "rpc/typed.hh"
#include "service/index_methods.hh"
#include "service/pd_methods.hh"

namespace ic::service {
namespace {

namespace pb = ::inferencecache::v1alpha1;

std::string path(std::string_view method) {
  return "/" + std::string(kInferenceCacheService) + "/" + std::string(method);
}

pb::Ack accepted() {
  pb::Ack ack;
  ack.set_accepted(true);
  return ack;
}

// ReportCacheState without an index: decode (to reject garbage), drop, and
// acknowledge at half-close.
class DrainHandler final : public rpc::CallHandler {
 public:
  explicit DrainHandler(rpc::CallHandle call) : call_(std::move(call)) {}
  void on_message(std::span<const std::byte> message) override {
    pb::CacheStateUpdate update;
    rpc::parse_request(message, update, call_);
  }
  void on_half_close() override { call_.reply(accepted()); }

 private:
  rpc::CallHandle call_;
};

template <typename Request, typename Fn>
void unary(rpc::MethodTable& methods, std::string_view name, Fn fn) {
  methods.add(path(name), rpc::single_request_method<Request>(rpc::CallKind::kUnary, fn));
}

template <typename Request>
void empty_stream(rpc::MethodTable& methods, std::string_view name) {
  methods.add(path(name), rpc::single_request_method<Request>(rpc::CallKind::kServerStreaming,
                                                              [](rpc::CallHandle call, Request&&) {
                                                                call.finish(rpc::Status::ok());
                                                              }));
}

// The contract's answers without an index.
rpc::Method default_lookup() {
  return rpc::single_request_method<pb::LookupRouteRequest>(
      rpc::CallKind::kUnary, [](rpc::CallHandle call, pb::LookupRouteRequest&& request) {
        pb::LookupRouteResponse response;
        response.set_reason_code("NO_HINT");
        metrics::local().record_lookup(request.model_id(), "NO_HINT", false, 0);
        call.reply(response);
      });
}

rpc::Method default_report() {
  rpc::Method report;
  report.kind = rpc::CallKind::kClientStreaming;
  report.make = [](rpc::CallHandle call) -> std::unique_ptr<rpc::CallHandler> {
    return std::make_unique<DrainHandler>(std::move(call));
  };
  return report;
}

}  // namespace

void add_inference_cache(rpc::MethodTable& methods, ShardedIndex* index,
                         const PromptTextConfig* prompt, prompt_text::Scheduler* scheduler) {
  namespace im = index_methods;
  methods.add(path("LookupRoute"),
              index != nullptr ? im::lookup_route(*index, prompt, scheduler) : default_lookup());
  methods.add(path("ReportCacheState"),
              index != nullptr ? im::report_cache_state(*index) : default_report());
  if (index != nullptr) {
    methods.add(path("PublishEvent"), im::publish_event(*index));
    methods.add(path("GetCacheState"), im::get_cache_state(*index));
  } else {
    unary<pb::CacheEvent>(methods, "PublishEvent",
                          [](rpc::CallHandle call, pb::CacheEvent&&) { call.reply(accepted()); });
    unary<pb::GetCacheStateRequest>(methods, "GetCacheState",
                                    [](rpc::CallHandle call, pb::GetCacheStateRequest&&) {
                                      call.reply(pb::GetCacheStateResponse());
                                    });
  }
  unary<pb::RenderTemplateRequest>(methods, "RenderTemplate",
                                   [](rpc::CallHandle call, pb::RenderTemplateRequest&&) {
                                     pb::RenderTemplateResponse response;
                                     response.set_reason_code("OK");
                                     call.reply(response);
                                   });
  if (index != nullptr) {
    methods.add(path("LookupPDRoute"), pd_methods::lookup_pd_route(*index, prompt, scheduler));
  } else {
    unary<pb::LookupPDRouteRequest>(methods, "LookupPDRoute",
                                    [](rpc::CallHandle call, pb::LookupPDRouteRequest&&) {
                                      pb::LookupPDRouteResponse response;
                                      response.set_reason_code("NO_HINT");
                                      call.reply(response);
                                    });
  }
  empty_stream<pb::StreamEventsRequest>(methods, "StreamCacheEvents");
  empty_stream<pb::StreamMetricsRequest>(methods, "StreamMetrics");
}

}  // namespace ic::service
