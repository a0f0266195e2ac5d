#pragma once
// inferencecache-server's composition root: everything the server is made of
// (App), how it is wired, started, reloaded and stopped.
//
// Start order (docs/architecture.md rule 10): flags → logging → runtime → metrics
// registry → policies → index partitions (one Shard per core) → listeners
// bound (a busy port fails the start) → reactor threads start; on each core:
// services (gRPC method table, index sweep, policy file poll), then its
// accepts are armed last. SIGTERM/SIGINT: /readyz says "draining", the gRPC
// listener closes, every gRPC connection gets on_shutdown() (GOAWAY),
// in-flight calls finish within --shutdown-grace while the admin listeners
// keep answering (/healthz, /readyz, /metrics), then everything closes,
// reactors stop and join, exit 0. SIGHUP re-reads the policy file, the
// templates file, the control token and the TLS certificate and key; it never
// stops the server.
//
// app.cc wires and starts it, policy_reload.cc installs and broadcasts
// policies and serves reloads, run.cc runs it under the process's signals.

#include <signal.h>

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admin/readiness.hh"
#include "config/flags.hh"
#include "config/policy_store.hh"
#include "gateway/config.hh"
#include "index/clock.hh"
#include "index/shard.hh"
#include "metrics/registry.hh"
#include "net/server.hh"
#include "net/tls_reload.hh"
#include "persist/state_lock.hh"
#include "persist/state_saver.hh"
#include "placement/spread.hh"
#include "prompt_text/models.hh"
#include "prompt_text/scheduler.hh"
#include "replication/bootstrap.hh"
#include "replication/replicator.hh"
#include "runtime/runtime.hh"
#include "server/idle_collect.hh"
#include "service/event_fanout.hh"
#include "service/grpc_server.hh"
#include "service/metric_stream.hh"
#include "service/prompt_input.hh"
#include "sharding/sharded_index.hh"
#include "templates/catalog.hh"
#include "templates/render_method.hh"
#include "templates/template_file.hh"

namespace ic::server {

using ic::config::ServerConfig;

// Exit codes: a bad flag value (usage), a failed start (a busy port).
inline constexpr int kExitUsage = 2;
inline constexpr int kExitStartup = 1;
// How to let the server use io_uring where it is refused (the log's "hint").
inline constexpr std::string_view kIoUringHint =
    "allow the io_uring_setup, io_uring_enter and io_uring_register syscalls in the seccomp "
    "profile, or set the sysctl kernel.io_uring_disabled=0 (docs/admin.md \"Reactor backend\"); "
    "--reactor-backend epoll runs without it";
// How often core 0 stats --policy-file for changes, µs.
inline constexpr std::int64_t kPolicyPollUs = 1'000'000;

// --reactor-backend as the runtime's choice.
ic::runtime::BackendChoice backend_choice(ic::config::ReactorBackend flag);

// Everything the server is made of, in construction order; destroyed in
// reverse, after the reactors joined.
struct App {
  explicit App(const ServerConfig& cfg)
      : config(cfg),
        runtime(ic::runtime::Runtime::Options{.cores = cfg.threads,
                                              .pin_threads = cfg.pin_threads,
                                              .backend = backend_choice(cfg.reactor_backend)}),
        registry(runtime.cores()),
        readiness(runtime.cores()),
        metric_subscribers(ic::service::MetricStreamLimits{.max_subscriptions =
                                                               cfg.metrics_stream_max_subscribers}),
        server(runtime) {
    register_metrics();
  }

  // The subsystems' own metric families (metrics/group.hh), in the order
  // /metrics shows them.
  void register_metrics();
  bool load_policies();
  bool load_tls();
  // --nats-creds-file holds a user JWT and seed; false (logged) when not.
  bool check_nats_creds();
  bool load_tokenizer_models();
  void log_serving();
  void reload(std::string_view why);
  void reload_policy_file();
  void reload_token_file();
  void reload_tls(bool forced);
  void build_shards();
  // Loads --state-file (and the replication snapshot); an exit code when the
  // server must stop instead (the file is locked by another server: 1; a
  // signal during the load: 0).
  std::optional<int> load_state();
  std::optional<int> lock_state_file();
  void start_replication(const ic::persist::LoadOutcome& loaded);
  ic::persist::LoadOutcome load_state_file();
  void keep_state_file_aside();
  void load_from_stream(ic::persist::LoadOutcome& got);
  void install_saved_policy(const std::string& json, std::string_view source);
  void save_final_state();
  std::string add_listeners();
  std::string add_gateway_listener();
  void install_collectors();
  // Starts the reactors (start_core on each); "" or why they did not start.
  std::string start_runtime();
  void start_core(unsigned core);
  void sweep_index(unsigned core);
  void poll_policy_file();
  void report_policy_file(bool installed, std::uint64_t errors_before);
  void broadcast_policies(std::shared_ptr<const ic::config::PolicySet> set);
  // Prompt templates (server/templates.cc, docs/templates.md).
  bool load_templates();
  void reload_templates_file();
  void poll_templates_file();
  void report_templates_file(ic::templates::TemplateParseResult parsed);
  void install_saved_templates(const std::string& json, std::string_view source);
  void install_templates_everywhere(std::shared_ptr<const ic::templates::TemplateSet> set);
  void broadcast_templates(std::shared_ptr<const ic::templates::TemplateSet> set);
  void replicated_templates(std::uint64_t sequence, const std::string& json);

  const ServerConfig& config;
  ic::runtime::Runtime runtime;
  // --state-file and --nats-url figures, registered with (and outliving) the registry.
  ic::persist::PersistStats persist_stats;
  ic::replication::ReplicationStats replication_stats;
  ic::metrics::Registry registry;
  ic::admin::Readiness readiness;
  // gRPC listener TLS, when configured; re-read on SIGHUP and on change.
  std::unique_ptr<ic::net::TlsCertificateStore> tls;
  std::unique_ptr<ic::config::PolicyStore> policy_file;
  std::shared_ptr<const ic::config::PolicySet> initial_policies;
  ic::index::IndexGlobals index_globals;
  std::vector<std::unique_ptr<ic::index::Shard>> shards;
  std::unique_ptr<ic::persist::StateLock> state_lock;       // --state-file, held to exit
  std::unique_ptr<ic::persist::StateSaver> state_saver;     // --state-file
  std::unique_ptr<ic::replication::Replicator> replicator;  // --nats-url
  // Routes each tenant's calls to its owner core's shard (rule 8).
  ic::index::SystemClock clock;
  std::unique_ptr<ic::sharding::ShardedIndex> index;
  // --spread-tenants: read copies on other cores (docs/placement.md).
  std::unique_ptr<ic::placement::SpreadPlacement> placement;
  std::unique_ptr<ic::service::EventFanout> events;  // StreamCacheEvents
  // StreamMetrics calls open across the cores (--metrics-stream-max-subscribers).
  ic::service::MetricSubscribers metric_subscribers;
  // --tokenizer-models-dir, loaded before the reactors start; read-only after.
  ic::prompt_text::ModelSet tokenizer_models;
  ic::service::PromptTextConfig prompt_text;
  // Prompt templates per core and the RenderTemplate method's view of them.
  std::unique_ptr<ic::templates::Catalog> templates;
  // --templates-file, owned by core 0 once the reactors run (polled like
  // --policy-file, re-read on SIGHUP).
  std::unique_ptr<ic::templates::TemplatesFile> templates_file;
  ic::templates::RenderService render_service;
  ic::gateway::GatewayConfig gateway;  // the endpoint picker's (set before the cores start)
  // Per core: the scheduler of tokenizing jobs its LookupRoute, RenderTemplate
  // and endpoint picker share (prompt_text/scheduler.hh); made on the core
  // by start_core, outlives the core's gRPC server.
  std::vector<std::shared_ptr<ic::prompt_text::Scheduler>> prompt_schedulers;
  std::vector<std::unique_ptr<ic::service::CoreGrpcServer>> grpc_servers;
  std::vector<ic::net::SessionFactory> grpc_factories;
  // --gateway-listen: the endpoint picker's own gRPC servers, one per core.
  std::vector<std::unique_ptr<ic::service::CoreGrpcServer>> gateway_servers;
  std::vector<ic::net::SessionFactory> gateway_factories;
  std::atomic<unsigned> cores_serving{0};
  // Per core: a quiet core's free heap pages handed back (server/idle_collect.hh).
  std::vector<IdleCollect> idle_collect;
  ic::net::Server server;  // last member: destroyed first
};

// Rejects unparsable listen addresses with the flag name ("" when all parse;
// exit 2 otherwise).
std::string check_addresses(const ServerConfig& config);

// Runs the server until SIGTERM/SIGINT and the drain; returns the exit code.
// Precondition: SIGTERM, SIGINT and SIGHUP are blocked in every thread.
int run(const ServerConfig& config);

// The set of `signals` (for pthread_sigmask / sigtimedwait).
sigset_t signal_set(std::initializer_list<int> signals);

}  // namespace ic::server
