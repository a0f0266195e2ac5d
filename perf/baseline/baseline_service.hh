#pragma once
// The grpc++ baseline: InferenceCache served by grpc++'s callback API over
// the same index library as inferencecache-server. It is what a user would
// deploy without our reactor, so it is configured fairly (no artificial
// slowness): handlers run inline on grpc++'s callback threads and take only
// the owning shard's mutex (perf/README.md "The baseline").

#include <grpcpp/grpcpp.h>

#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "sharded_index.hh"

namespace ic::perf {

namespace pb = ::inferencecache::v1alpha1;

// LookupRoute, ReportCacheState and RenderTemplate (the do-nothing transport
// ceiling). Every other method answers grpc++'s default UNIMPLEMENTED.
class BaselineService final : public pb::InferenceCache::CallbackService {
 public:
  // `index` must outlive the service (and the grpc::Server it is registered on).
  explicit BaselineService(ShardedIndex& index) : index_(index) {}

  // Unary hot path: one shard lock, one index lookup (docs/lookup.md).
  grpc::ServerUnaryReactor* LookupRoute(grpc::CallbackServerContext* context,
                                        const pb::LookupRouteRequest* request,
                                        pb::LookupRouteResponse* response) override;

  // Client stream: each CacheStateUpdate is ingested as it arrives under its
  // tenant's shard lock; half-close answers Ack{accepted:true} (docs/contract.md).
  grpc::ServerReadReactor<pb::CacheStateUpdate>* ReportCacheState(
      grpc::CallbackServerContext* context, pb::Ack* response) override;

  // {reason_code:"TEMPLATE_NOT_FOUND"}, the server's answer for a template it does not
  // hold: measures grpc++ alone, no index work.
  grpc::ServerUnaryReactor* RenderTemplate(grpc::CallbackServerContext* context,
                                           const pb::RenderTemplateRequest* request,
                                           pb::RenderTemplateResponse* response) override;

 private:
  ShardedIndex& index_;
};

}  // namespace ic::perf
