#include "baseline_service.hh"

namespace ic::perf {

namespace {

// Reads the client stream one message at a time; the reactor deletes itself
// in OnDone, which grpc++ calls exactly once after Finish.
class CacheStateReader final : public grpc::ServerReadReactor<pb::CacheStateUpdate> {
 public:
  CacheStateReader(ShardedIndex& index, pb::Ack* ack) : index_(index), ack_(ack) {
    StartRead(&update_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // half-close (or cancel): everything read so far is kept
      ack_->set_accepted(true);
      Finish(grpc::Status::OK);
      return;
    }
    index_.ingest(update_);
    update_.Clear();
    StartRead(&update_);
  }

  void OnDone() override { delete this; }

 private:
  ShardedIndex& index_;
  pb::Ack* ack_;
  pb::CacheStateUpdate update_;
};

}  // namespace

grpc::ServerUnaryReactor* BaselineService::LookupRoute(grpc::CallbackServerContext* context,
                                                       const pb::LookupRouteRequest* request,
                                                       pb::LookupRouteResponse* response) {
  index_.lookup(*request, context->deadline(), *response);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerReadReactor<pb::CacheStateUpdate>* BaselineService::ReportCacheState(
    grpc::CallbackServerContext* /*context*/, pb::Ack* response) {
  return new CacheStateReader(index_, response);
}

grpc::ServerUnaryReactor* BaselineService::RenderTemplate(
    grpc::CallbackServerContext* context, const pb::RenderTemplateRequest* /*request*/,
    pb::RenderTemplateResponse* response) {
  response->set_reason_code("TEMPLATE_NOT_FOUND");
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace ic::perf
