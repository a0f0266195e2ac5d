#pragma once
// Composition-root API of the gRPC port (used by src/main.cc).
//
// Wiring, per core, on that core's reactor thread (Runtime::start on_start):
//
//   ic::service::GrpcServiceOptions opts;            // from the ServerConfig
//   opts.grpc.max_message_bytes = cfg.max_recv_bytes;  // 4 MiB default
//   opts.grpc.h2.max_concurrent_streams = cfg.max_streams;
//   opts.ready = [&] { return ready_flag.load(std::memory_order_relaxed); };
//   // once, before Runtime::start: shards[c] = core c's index::Shard
//   static ic::index::SystemClock clock;
//   static ic::sharding::ShardedIndex index(runtime, shards, clock);
//   opts.index = &index;
//   static ic::service::EventFanout events(index);  // StreamCacheEvents
//   opts.events = &events;
//   opts.scrape_metrics = [&](auto done) { ic::metrics::scrape(runtime, registry, done); };
//   auto server = std::make_unique<ic::service::CoreGrpcServer>(
//       opts, ic::runtime::current_reactor());   // the core's Timers
//   net.listen_grpc(server->session_factory());     // SessionFactory per core
//
// Keep each CoreGrpcServer alive until its core's reactor has stopped (the
// sessions and their timers point into it). Shutdown: Session::on_shutdown()
// sends GOAWAY, ends the Health.Watch, StreamCacheEvents and StreamMetrics
// streams, lets in-flight calls finish; Session::idle() turns true when no
// stream is left, and the session closes its connection itself once the
// GOAWAY is out and the last stream ended.

#include <functional>
#include <memory>

#include "net/session.hh"
#include "rpc/call.hh"
#include "rpc/server_calls.hh"
#include "rpc/timers.hh"
#include "runtime/runtime.hh"
#include "service/health.hh"
#include "service/metric_stream.hh"

namespace ic::sharding {
class ShardedIndex;
}  // namespace ic::sharding

namespace ic::prompt_text {
class Scheduler;
}  // namespace ic::prompt_text

namespace ic::service {

using sharding::ShardedIndex;  // the cross-core index (src/sharding/)
class EventFanout;
struct PromptTextConfig;

struct GrpcServiceOptions {
  // Per-message receive limit and HTTP/2 hostile-peer limits (docs/contract.md:
  // 4 MiB; h2::Limits defaults: 100 concurrent streams, 16 KiB header list,
  // 8 CONTINUATIONs, RST_STREAM rate 1000 burst / 33 per s, 4 MiB out queue).
  rpc::ServerOptions grpc;
  // Health reports SERVING while this returns true; nullptr = always ready.
  ReadyFn ready;
  // Index routing for LookupRoute / ReportCacheState / PublishEvent /
  // GetCacheState (sharding/sharded_index.hh); nullptr = contract defaults.
  // Shared by every core's server; outlives them.
  ShardedIndex* index = nullptr;
  // StreamCacheEvents (service/event_fanout.hh), shared by every core's
  // server; nullptr = contract default (closes at once).
  EventFanout* events = nullptr;
  // StreamMetrics source (service/metric_stream.hh), e.g. metrics::scrape;
  // nullptr = contract default (closes at once). Samples every
  // metrics_interval_us (> 0).
  ScrapeFn scrape_metrics;
  std::int64_t metrics_interval_us = kDefaultMetricStreamIntervalUs;
  // StreamMetrics subscriber bounds, shared by every core's server; nullptr:
  // one process-wide MetricSubscribers with the default limits.
  MetricSubscribers* metric_subscribers = nullptr;
  // prompt_text lookups (service/prompt_input.hh); nullptr: they fail open.
  // Shared by every core's server; outlives them.
  const PromptTextConfig* prompt_text = nullptr;
  // This core's scheduler of tokenizing jobs (prompt_text/scheduler.hh),
  // which the server shares with the methods add_methods adds (the endpoint
  // picker, RenderTemplate); outlives the server. nullptr: prompt_text is
  // tokenized in one go (tests).
  prompt_text::Scheduler* prompt_scheduler = nullptr;
  // Methods of other rooms served on this port, added after the defaults (one
  // of the same path replaces the default): RenderTemplate
  // (templates/render_method.hh) and the endpoint picker (gateway/ext_proc.hh);
  // called with this core's table and timers before reflection lists the
  // services; empty = none.
  std::function<void(rpc::MethodTable&, rpc::Timers&)> add_methods;
  // false: no InferenceCache service (a listener of add_methods, health and
  // reflection only: the endpoint picker's own, --gateway-listen).
  bool inference_cache = true;
};

// One core's gRPC server: the method table (InferenceCache, Health,
// reflection v1 + v1alpha), the per-core ServerContext and its timers.
// The first one built silences protobuf's log handler process-wide (a peer's
// invalid UTF-8 would otherwise log one stderr line per message).
class CoreGrpcServer {
 public:
  // `timers`: this core's (its runtime::Reactor in the server, a manual clock
  // in tests); outlives the server.
  CoreGrpcServer(const GrpcServiceOptions& options, rpc::Timers& timers);
  ~CoreGrpcServer();
  CoreGrpcServer(const CoreGrpcServer&) = delete;
  CoreGrpcServer& operator=(const CoreGrpcServer&) = delete;

  // Builds the HTTP/2 session with the gRPC layer on top
  // (rpc::make_server_session) per accepted connection (captures `this`).
  net::SessionFactory session_factory();
  // The same, for a factory shared by all cores that picks the server of
  // `connection.core()`.
  std::unique_ptr<net::Session> make_session(net::Connection& connection);
  const rpc::MethodTable& methods() const { return methods_; }

 private:
  void build(const GrpcServiceOptions& options);

  rpc::MethodTable methods_;
  rpc::ServerContext context_;
};

}  // namespace ic::service
