// IndexClient over grpc++ (sync stub for LookupRoute and the ReportCacheState streams, the
// callback API for pipelined PublishEvent).
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>

#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "replay/index_client.hh"

namespace ic::tools::replay {

class GrpcIndexClient final : public IndexClient {
 public:
  // `lookups` carries LookupRoute only, so its latency is not queued behind ingest on the same
  // connection; `ingest` carries the streams and events. `rpc_timeout_ms` bounds each unary call.
  GrpcIndexClient(std::shared_ptr<grpc::Channel> lookups, std::shared_ptr<grpc::Channel> ingest,
                  int rpc_timeout_ms);
  ~GrpcIndexClient() override;

  LookupCall lookup(const inferencecache::v1alpha1::LookupRouteRequest& request,
                    inferencecache::v1alpha1::LookupRouteResponse* response) override;
  LookupCall lookup_pd(const inferencecache::v1alpha1::LookupPDRouteRequest& request,
                       inferencecache::v1alpha1::LookupPDRouteResponse* response) override;
  bool report(std::size_t stream, const inferencecache::v1alpha1::CacheStateUpdate& update,
              std::string* error) override;
  void publish(const inferencecache::v1alpha1::CacheEvent& event) override;
  bool finish(std::string* error) override;
  std::int64_t failed_events() const override;

 private:
  struct Stream {
    grpc::ClientContext context;
    inferencecache::v1alpha1::Ack ack;
    std::unique_ptr<grpc::ClientWriter<inferencecache::v1alpha1::CacheStateUpdate>> writer;
  };
  struct PendingEvent;

  std::unique_ptr<inferencecache::v1alpha1::InferenceCache::Stub> lookup_stub_;
  std::unique_ptr<inferencecache::v1alpha1::InferenceCache::Stub> ingest_stub_;
  int rpc_timeout_ms_;
  std::map<std::size_t, std::unique_ptr<Stream>> streams_;

  mutable std::mutex mutex_;
  std::condition_variable drained_;
  int events_in_flight_ = 0;
  std::int64_t failed_events_ = 0;
  std::string first_event_error_;
};

}  // namespace ic::tools::replay
