// inferencecache-server: the composition root.
//
// Start order (docs/architecture.md rule 10): flags → logging → runtime → metrics
// registry → policies → index partitions (one Shard per core) → listeners
// bound (a busy port fails the start) → reactor threads start; on each core:
// services (gRPC method table, index sweep, policy file poll), then its
// accepts are armed last. SIGTERM/SIGINT: /readyz says "draining", the gRPC
// listener closes, every gRPC connection gets on_shutdown() (GOAWAY),
// in-flight calls finish within --shutdown-grace while the admin listeners
// keep answering (/healthz, /readyz, /metrics), then everything closes,
// reactors stop and join, exit 0. SIGHUP re-reads the policy file, the control
// token and the TLS certificate and key; it never stops the server.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "admin/auth.hh"
#include "admin/readiness.hh"
#include "admin/server.hh"
#include "buildinfo/build_info.hh"
#include "config/flags.hh"
#include "config/log.hh"
#include "config/policy_store.hh"
#include "index/clock.hh"
#include "index/shard.hh"
#include "metrics/labels.hh"
#include "metrics/registry.hh"
#include "metrics/scrape.hh"
#include "net/address.hh"
#include "net/server.hh"
#include "net/tls.hh"
#include "net/tls_reload.hh"
#include "persist/state_saver.hh"
#include "prompt_text/models.hh"
#include "replication/replicator.hh"
#include "runtime/runtime.hh"
#include "service/core_link.hh"
#include "service/event_fanout.hh"
#include "service/grpc_server.hh"
#include "service/index_router.hh"
#include "service/prompt_input.hh"

namespace {

using ic::config::LogLevel;
using ic::config::ServerConfig;

constexpr int kExitUsage = 2;
constexpr int kExitStartup = 1;
// Entry slots one TTL sweep slice examines (docs/index.md: bounded slices).
constexpr std::size_t kSweepSliceBudget = 4096;
// How often core 0 stats --policy-file for changes.
constexpr std::int64_t kPolicyPollUs = 1'000'000;
// How often the signal thread stats the TLS certificate and key for changes.
constexpr timespec kTlsPoll{1, 0};

// Rejects unparsable listen addresses with the flag name (exit 2).
std::string check_addresses(const ServerConfig& config) {
  const std::pair<const char*, const std::string*> flags[] = {
      {"--grpc-bind-address", &config.grpc_bind_address},
      {"--http-bind-address", &config.http_bind_address},
      {"--snapshot-bind-address", &config.snapshot_bind_address},
  };
  for (const auto& [flag, value] : flags) {
    std::string why;
    if (!ic::net::parse_address(*value, &why)) {
      return std::string(flag) + ": invalid address \"" + *value + "\": " + why;
    }
  }
  return {};
}

ic::index::IndexConfig index_config(const ServerConfig& config) {
  ic::index::IndexConfig ic;
  ic.default_ttl_us = config.index_ttl_us;
  ic.max_entries = static_cast<std::int64_t>(config.index_max_entries);
  ic.engine_block_size = static_cast<std::int32_t>(config.engine_block_size);
  ic.ranking = config.ranking;
  ic.load_aware = config.load_aware;
  return ic;
}

// Everything the server is made of, in construction order; destroyed in
// reverse, after the reactors joined.
struct App {
  explicit App(const ServerConfig& cfg)
      : config(cfg),
        runtime(
            ic::runtime::Runtime::Options{.cores = cfg.threads, .pin_threads = cfg.pin_threads}),
        registry(runtime.cores()),
        readiness(runtime.cores()),
        server(runtime) {}

  bool load_policies();
  bool load_tls();
  bool load_tokenizer_models();
  void log_serving();
  void reload(std::string_view why);
  void reload_policy_file();
  void reload_token_file();
  void reload_tls(bool forced);
  void build_shards();
  void load_state();
  void start_replication(const ic::persist::LoadOutcome& loaded);
  void save_final_state();
  std::string add_listeners();
  void install_collectors();
  void start_core(unsigned core);
  void sweep_index(unsigned core);
  void poll_policy_file();
  void report_policy_file(bool installed, std::uint64_t errors_before);
  void broadcast_policies(std::shared_ptr<const ic::config::PolicySet> set);

  const ServerConfig& config;
  ic::runtime::Runtime runtime;
  ic::metrics::Registry registry;
  ic::admin::Readiness readiness;
  // gRPC listener TLS, when configured; re-read on SIGHUP and on change.
  std::unique_ptr<ic::net::TlsCertificateStore> tls;
  std::unique_ptr<ic::config::PolicyStore> policy_file;
  std::shared_ptr<const ic::config::PolicySet> initial_policies;
  ic::index::IndexGlobals index_globals;
  std::vector<std::unique_ptr<ic::index::Shard>> shards;
  std::unique_ptr<ic::persist::StateSaver> state_saver;     // --state-file
  std::unique_ptr<ic::replication::Replicator> replicator;  // --nats-url
  // Routes each tenant's calls to its owner core's shard (rule 8).
  ic::service::RuntimeLink link{runtime};
  ic::index::SystemClock clock;
  std::unique_ptr<ic::service::IndexRouter> router;
  std::unique_ptr<ic::service::EventFanout> events;  // StreamCacheEvents
  // --tokenizer-models-dir, loaded before the reactors start; read-only after.
  ic::prompt_text::ModelSet tokenizer_models;
  ic::service::PromptTextConfig prompt_text;
  std::vector<std::unique_ptr<ic::service::CoreGrpcServer>> grpc_servers;
  std::vector<ic::net::SessionFactory> grpc_factories;
  std::atomic<unsigned> cores_serving{0};
  ic::net::Server server;  // last member: destroyed first
};

bool App::load_policies() {
  initial_policies = ic::config::PolicySet::defaults();
  if (config.policy_file.empty()) return true;
  policy_file = std::make_unique<ic::config::PolicyStore>(config.policy_file);
  if (!policy_file->load()) {
    std::fprintf(stderr, "inferencecache-server: --policy-file: %s\n",
                 policy_file->last_error().c_str());
    return false;
  }
  initial_policies = policy_file->current();
  return true;
}

// --tls-cert-file/--tls-key-file: gRPC over TLS with ALPN h2. An unusable
// certificate or key is a bad flag value (exit 2).
bool App::load_tls() {
  if (config.tls_cert_file.empty()) return true;
  std::string error;
  tls = std::make_unique<ic::net::TlsCertificateStore>(config.tls_cert_file, config.tls_key_file,
                                                       std::vector<std::string>{"h2"});
  if (!tls->load(&error)) {
    std::fprintf(stderr, "inferencecache-server: %s\n", error.c_str());
    return false;
  }
  registry.set_grpc_tls_enabled(true);
  return true;
}

// --tokenizer-models-dir: every model subdirectory, loaded once; a model
// that does not load is logged and left out (its prompt_text lookups fail
// open). A directory that cannot be listed is a bad flag value (exit 2).
bool App::load_tokenizer_models() {
  const ic::index::IndexConfig limits = index_config(config);
  prompt_text.models = &tokenizer_models;
  prompt_text.max_prompt_bytes = limits.max_prompt_bytes;
  prompt_text.max_token_ids = limits.max_token_ids;
  if (config.tokenizer_models_dir.empty()) return true;
  std::vector<ic::prompt_text::LoadReport> reports;
  std::string error;
  if (!tokenizer_models.load_dir(config.tokenizer_models_dir, reports, error)) {
    std::fprintf(stderr, "inferencecache-server: --tokenizer-models-dir: %s\n", error.c_str());
    return false;
  }
  for (const auto& r : reports) {
    if (r.loaded) {
      ic::config::log(LogLevel::info, "tokenizer model loaded",
                      {{"model", r.model_id}, {"detail", r.detail}});
    } else {
      ic::config::log(LogLevel::warn, "tokenizer model not loaded: prompt_text fails open for it",
                      {{"model", r.model_id}, {"error", r.detail}});
    }
  }
  ic::config::log(LogLevel::info, "tokenizer models",
                  {{"dir", config.tokenizer_models_dir}, {"loaded", tokenizer_models.size()}});
  return true;
}

void App::build_shards() {
  for (unsigned core = 0; core < runtime.cores(); ++core) {
    shards.push_back(
        std::make_unique<ic::index::Shard>(index_config(config), &index_globals, initial_policies));
  }
  std::vector<ic::index::Shard*> shard_ptrs;
  for (auto& shard : shards) shard_ptrs.push_back(shard.get());
  router = std::make_unique<ic::service::IndexRouter>(link, std::move(shard_ptrs), clock);
  events = std::make_unique<ic::service::EventFanout>(*router);
  grpc_servers.resize(runtime.cores());
  grpc_factories.resize(runtime.cores());
}

std::vector<ic::index::Shard*> shard_pointers(
    const std::vector<std::unique_ptr<ic::index::Shard>>& shards) {
  std::vector<ic::index::Shard*> out;
  for (const auto& shard : shards) out.push_back(shard.get());
  return out;
}

// --state-file: restore the index before any listener is up (so /readyz only
// says ready with it loaded). Policy: --policy-file wins; otherwise the saved
// document (the last one pushed to /policy) comes back.
void App::load_state() {
  if (config.state_file.empty()) {
    start_replication({});
    return;
  }
  registry.persist().set_enabled();
  const ic::persist::LoadOutcome got =
      ic::persist::load_state(config.state_file, shard_pointers(shards), clock.wall_us());
  const std::string_view result = ic::persist::load_status_name(got.status);
  registry.persist().record_load(static_cast<int>(got.status), got.entries);
  if (got.status != ic::persist::LoadStatus::kOk) {
    ic::config::log(
        got.status == ic::persist::LoadStatus::kMissing ? LogLevel::info : LogLevel::warn,
        "state file not loaded: starting cold",
        {{"path", config.state_file}, {"result", std::string(result)}, {"error", got.error}});
  } else {
    ic::config::log(LogLevel::info, "state file loaded",
                    {{"path", config.state_file},
                     {"entries", got.entries},
                     {"written_by", got.server_version},
                     {"age_s", (clock.wall_us() - got.created_at_us) / 1'000'000}});
  }
  if (got.status == ic::persist::LoadStatus::kOk && !policy_file && !got.policy_json.empty()) {
    ic::config::PolicyParseResult parsed = ic::config::parse_policy_json(got.policy_json);
    if (parsed.ok()) {
      for (auto& shard : shards) shard->set_policies(parsed.set);
    } else {
      ic::config::log(LogLevel::warn, "saved policy rejected: using defaults",
                      {{"error", parsed.error}});
    }
  }
  start_replication(got);
  ic::persist::StateSaver::Options options;
  if (replicator) options.stream_position = [this] { return replicator->position(); };
  options.path = config.state_file;
  options.interval_us = config.state_save_interval_us;
  options.server_version = IC_SERVER_VERSION;
  state_saver = std::make_unique<ic::persist::StateSaver>(options, runtime, shard_pointers(shards),
                                                          registry.persist());
}

// --nats-url (docs/replication.md): resume the stream after the loaded state
// file's position when it names this stream, else from its start.
void App::start_replication(const ic::persist::LoadOutcome& loaded) {
  if (config.nats_url.empty()) return;
  ic::replication::ReplicatorOptions options{.url = config.nats_url,
                                             .stream = config.nats_stream,
                                             .buffer_bytes = config.nats_buffer_bytes,
                                             .max_age_us = config.index_ttl_us};
  if (loaded.status == ic::persist::LoadStatus::kOk && loaded.stream_name == config.nats_stream) {
    options.resume_after = loaded.stream_sequence;
  }
  replicator =
      std::make_unique<ic::replication::Replicator>(options, *router, registry.replication());
  router->set_observer(replicator.get());
}

// After the reactors joined: the exact final snapshot.
void App::save_final_state() {
  if (!state_saver) return;
  if (std::string error = state_saver->save_stopped(); !error.empty()) {
    ic::config::log(LogLevel::error, "state file not saved at shutdown",
                    {{"path", config.state_file}, {"error", error}});
  } else {
    ic::config::log(LogLevel::info, "state file saved", {{"path", config.state_file}});
  }
}

std::string App::add_listeners() {
  ic::net::ListenerOptions grpc;
  grpc.name = "grpc";
  grpc.address = config.grpc_bind_address;
  grpc.max_connections = config.max_connections;
  grpc.idle_timeout_us = config.idle_timeout_us;
  grpc.output_high_water = std::size_t{4} << 20;  // one max-size message in flight
  grpc.factory = [this](ic::net::Connection& conn) { return grpc_factories[conn.core()](conn); };
  if (tls) {
    ic::net::TlsCertificateStore* store = tls.get();
    grpc.factory =
        ic::net::tls_session_factory([store] { return store->current(); }, std::move(grpc.factory));
  }
  if (std::string e = server.add_listener(std::move(grpc)); !e.empty()) {
    return "--grpc-bind-address: " + e;
  }

  auto admin = std::make_shared<ic::admin::AdminContext>();
  admin->runtime = &runtime;
  admin->registry = &registry;
  admin->readiness = &readiness;
  admin->collect_snapshot = [this](unsigned core) { return shards[core]->collect_snapshot(); };
  admin->apply_policy = [this](unsigned core,
                               std::shared_ptr<const ic::config::PolicySet> policies) {
    // Core 0's install stands for the whole push: replicated once.
    if (core == 0 && replicator) replicator->accepted_policy(policies->source_json());
    shards[core]->set_policies(std::move(policies));
  };
  if (replicator) admin->readiness_detail = [this] { return replicator->readiness_detail(); };
  admin->control_token_file = config.control_token_file;
  admin->insecure_disable_auth = config.insecure_disable_auth;

  // Both admin listeners share the connection limits; only name, address and protocol differ.
  auto add_admin = [&](std::string name, const std::string& address, std::string_view flag,
                       ic::net::SessionFactory factory) -> std::string {
    ic::net::ListenerOptions options;
    options.name = std::move(name);
    options.address = address;
    options.max_connections = config.max_connections;
    options.idle_timeout_us = config.idle_timeout_us;
    options.factory = std::move(factory);
    std::string e = server.add_listener(std::move(options));
    return e.empty() ? e : std::string(flag) + ": " + e;
  };
  if (std::string e = add_admin("http", config.http_bind_address, "--http-bind-address",
                                ic::admin::make_public_session_factory(admin));
      !e.empty()) {
    return e;
  }
  if (std::string e = add_admin("snapshot", config.snapshot_bind_address, "--snapshot-bind-address",
                                ic::admin::make_control_session_factory(admin));
      !e.empty()) {
    return e;
  }
  return {};
}

void App::install_collectors() {
  using ic::metrics::Listener;
  // Connection gauges come from the net layer's per-listener atomics.
  const ic::net::ListenerStats* grpc = server.stats("grpc");
  const ic::net::ListenerStats* http = server.stats("http");
  const ic::net::ListenerStats* control = server.stats("snapshot");
  registry.set_global_collector([grpc, http, control](ic::metrics::Sample& merged) {
    const std::pair<Listener, const ic::net::ListenerStats*> rows[] = {
        {Listener::kGrpc, grpc}, {Listener::kHttp, http}, {Listener::kControl, control}};
    for (const auto& [listener, stats] : rows) {
      const auto i = static_cast<std::size_t>(listener);
      merged.open_connections[i] = stats->open.load(std::memory_order_relaxed);
      merged.accepted_connections[i] = stats->accepted_total.load(std::memory_order_relaxed);
    }
  });
  // Index and mailbox gauges are read on each core from its own shard.
  for (unsigned core = 0; core < runtime.cores(); ++core) {
    registry.core(core).add_collector([this, core](ic::metrics::CoreMetrics& m) {
      using ic::metrics::EvictionAlgorithm;
      using ic::metrics::EvictionReason;
      ic::index::Shard& shard = *shards[core];
      shard.for_each_model_keys(
          [&m](std::string_view model, std::int64_t keys) { m.set_index_entries(model, keys); });
      shard.for_each_tenant_eviction([&m](std::string_view tenant, std::uint64_t count) {
        m.set_tenant_evictions(tenant, count);
      });
      const ic::index::EvictionCounters& ev = shard.eviction_counters();
      m.set_index_evictions(EvictionAlgorithm::kLru, EvictionReason::kCap, ev.lru_cap);
      m.set_index_evictions(EvictionAlgorithm::kLfu, EvictionReason::kCap, ev.lfu_cap);
      m.set_index_evictions(EvictionAlgorithm::kLru, EvictionReason::kTtl, ev.lru_ttl);
      m.set_index_evictions(EvictionAlgorithm::kLfu, EvictionReason::kTtl, ev.lfu_ttl);
      m.set_core_index_entries(shard.entry_count());
      std::int64_t depth = 0;
      for (unsigned from = 0; from < runtime.cores(); ++from) {
        depth += static_cast<std::int64_t>(runtime.mailbox_depth(from, core));
      }
      m.set_mailbox_depth(depth);
    });
  }
}

// One TTL pass in bounded slices, one slice per loop turn, then wait for the
// next interval (docs/index.md "Expiry": never stall the core).
void App::sweep_index(unsigned core) {
  ic::runtime::Reactor& reactor = runtime.reactor(core);
  const bool pass_done = shards[core]->sweep_slice(reactor.wall_us(), kSweepSliceBudget);
  reactor.add_timer(pass_done ? config.sweep_interval_us : 0, [this, core] { sweep_index(core); });
}

void App::broadcast_policies(std::shared_ptr<const ic::config::PolicySet> set) {
  for (unsigned core = 0; core < runtime.cores(); ++core) {
    ic::index::Shard* shard = shards[core].get();
    auto task = [shard, set] { shard->set_policies(set); };
    // A full mailbox retries from a timer: a policy change must not be lost.
    if (!runtime.post(core, task)) {
      runtime.reactor(0).add_timer(1000, [this, set] { broadcast_policies(set); });
      return;
    }
  }
}

// Core 0 owns the --policy-file store (not thread-safe) and fans changes out.
void App::poll_policy_file() {
  const std::uint64_t errors = policy_file->error_count();
  report_policy_file(policy_file->poll(), errors);
  runtime.reactor(0).add_timer(kPolicyPollUs, [this] { poll_policy_file(); });
}

// Logs, counts and broadcasts the outcome of one read of --policy-file
// (`errors_before`: error_count() before it). Core 0 only.
void App::report_policy_file(bool installed, std::uint64_t errors_before) {
  if (installed) {
    ic::metrics::local().add_policy_reload(ic::metrics::PolicySource::kFile, true);
    const auto set = policy_file->current();
    ic::config::log(LogLevel::info, "policy accepted",
                    {{"source", "file"},
                     {"path", policy_file->path()},
                     {"policies", set->policy_count()},
                     {"quotas", set->quota_count()}});
    if (replicator) replicator->accepted_policy(set->source_json());
    broadcast_policies(set);
  } else if (policy_file->error_count() != errors_before) {
    // poll() only re-reads a changed file, so each failure is logged once.
    ic::metrics::local().add_policy_reload(ic::metrics::PolicySource::kFile, false);
    ic::config::log(LogLevel::warn, "policy rejected",
                    {{"source", "file"},
                     {"path", policy_file->path()},
                     {"error", policy_file->last_error()},
                     {"kept", "last good policy"}});
  }
}

void App::start_core(unsigned core) {
  registry.bind_current_thread(core);
  ic::service::GrpcServiceOptions opts;
  opts.grpc.max_message_bytes = config.max_message_bytes;
  opts.grpc.h2.max_concurrent_streams = config.max_concurrent_streams;
  opts.ready = [this] { return readiness.ready(); };
  opts.router = router.get();
  opts.events = events.get();
  opts.scrape_metrics = [this](auto done) { ic::metrics::scrape(runtime, registry, done); };
  opts.metrics_interval_us = config.metrics_stream_interval_us;
  opts.prompt_text = &prompt_text;
  grpc_servers[core] = std::make_unique<ic::service::CoreGrpcServer>(opts, runtime.reactor(core));
  grpc_factories[core] = grpc_servers[core]->session_factory();
  runtime.reactor(core).add_timer(config.sweep_interval_us, [this, core] { sweep_index(core); });
  if (core == 0 && policy_file) {
    runtime.reactor(0).add_timer(kPolicyPollUs, [this] { poll_policy_file(); });
  }
  server.start_core(core);  // listeners last
  readiness.core_serving(core);
  if (cores_serving.fetch_add(1) + 1 == runtime.cores()) {
    registry.set_server_up(true);
    log_serving();
  }
}

// The control listener's auth mode, as the startup line reports it.
std::string_view auth_mode(const ServerConfig& config) {
  if (config.insecure_disable_auth) return "disabled";
  return config.control_token_file.empty() ? "no token file: control requests refused"
                                           : "bearer token";
}

// True when `address` only accepts connections from this host.
bool loopback_only(const std::string& address) {
  std::string why;
  const auto addr = ic::net::parse_address(address, &why);
  if (!addr || addr->any_host) return false;
  if (addr->storage.ss_family == AF_INET) {
    const auto* sin = reinterpret_cast<const sockaddr_in*>(&addr->storage);
    return (ntohl(sin->sin_addr.s_addr) >> 24) == 127;
  }
  const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&addr->storage);
  return IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr) ||
         (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr) && sin6->sin6_addr.s6_addr[12] == 127);
}

void App::log_serving() {
  // Details and warnings first: once the "serving" line is out, they are too.
  if (tls) {
    const auto ctx = tls->current();
    ic::config::log(
        LogLevel::info, "TLS certificate loaded",
        {{"path", tls->cert_file()}, {"subject", ctx->subject()}, {"not_after", ctx->not_after()}});
  }
  if (config.insecure_disable_auth && !loopback_only(config.snapshot_bind_address)) {
    ic::config::log(LogLevel::warn,
                    "control listener has no auth and is reachable from other hosts",
                    {{"snapshot_address", config.snapshot_bind_address},
                     {"hint",
                      "anyone who can connect may read /snapshot and replace the policy via "
                      "/policy; bind --snapshot-bind-address to 127.0.0.1 or use "
                      "--control-token-file"}});
  }
  const ic::buildinfo::BuildInfo& build = ic::buildinfo::build_info();
  ic::config::log(LogLevel::info, "serving",
                  {{"version", build.version},
                   {"commit", build.git_commit},
                   {"build", build.build_type},
                   {"grpc_address", config.grpc_bind_address},
                   {"grpc_port", server.port("grpc")},
                   {"http_address", config.http_bind_address},
                   {"http_port", server.port("http")},
                   {"snapshot_address", config.snapshot_bind_address},
                   {"snapshot_port", server.port("snapshot")},
                   {"tls", tls != nullptr},
                   {"auth", auth_mode(config)},
                   {"threads", runtime.cores()},
                   {"policy_file", config.policy_file},
                   {"pid", static_cast<long>(::getpid())}});
}

// SIGHUP: re-read everything that comes from a file. Each part logs its own
// outcome; a bad file keeps the last good state.
void App::reload(std::string_view why) {
  ic::config::log(LogLevel::info, "reloading", {{"trigger", why}});
  reload_policy_file();
  reload_token_file();
  reload_tls(true);
}

void App::reload_policy_file() {
  if (!policy_file) return;
  // The store belongs to core 0: the reload runs there.
  const bool posted = runtime.post(0, [this] {
    const std::uint64_t errors = policy_file->error_count();
    report_policy_file(policy_file->load(), errors);
  });
  if (!posted) ic::config::log(LogLevel::warn, "policy reload not queued: core 0 mailbox full");
}

void App::reload_token_file() {
  if (config.control_token_file.empty()) return;
  ic::admin::force_token_reload();
  if (std::string problem = ic::admin::token_file_problem(config.control_token_file);
      !problem.empty()) {
    ic::config::log(LogLevel::warn, "control token rejected",
                    {{"path", config.control_token_file},
                     {"error", problem},
                     {"effect", "control requests answer 503 until the file is fixed"}});
  } else {
    ic::config::log(LogLevel::info, "control token reloaded",
                    {{"path", config.control_token_file}});
  }
}

// `forced`: SIGHUP (re-read even if unchanged); else only when a file changed.
void App::reload_tls(bool forced) {
  if (!tls) return;
  std::string error;
  const auto outcome = forced ? tls->reload(&error) : tls->poll(&error);
  using Outcome = ic::net::TlsCertificateStore::Outcome;
  if (outcome == Outcome::kReloaded) {
    const auto ctx = tls->current();
    ic::config::log(LogLevel::info, "TLS certificate reloaded",
                    {{"path", tls->cert_file()},
                     {"subject", ctx->subject()},
                     {"not_after", ctx->not_after()},
                     {"trigger", forced ? "SIGHUP" : "file changed"}});
  } else if (outcome == Outcome::kFailed) {
    ic::config::log(
        LogLevel::warn, "TLS certificate rejected",
        {{"path", tls->cert_file()}, {"error", error}, {"kept", "last good certificate"}});
  }
}

sigset_t signal_set(std::initializer_list<int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : signals) sigaddset(&set, sig);
  return set;
}

// Serves SIGHUP (reload) and watches the TLS files until SIGTERM/SIGINT;
// returns that signal's number.
int serve_signals(App& app) {
  const sigset_t set = signal_set({SIGTERM, SIGINT, SIGHUP});

  for (;;) {
    const int sig = sigtimedwait(&set, nullptr, &kTlsPoll);
    if (sig == SIGTERM || sig == SIGINT) return sig;
    if (sig == SIGHUP) {
      app.reload("SIGHUP");
    } else if (sig < 0 && errno == EAGAIN) {
      app.reload_tls(false);  // a quiet second: look at the certificate files
    }
  }
}

// Waits for `drained` (set by a reactor) while honouring a second signal,
// which skips the rest of the grace period.
void wait_drained(const std::atomic<bool>& drained, const sigset_t& set) {
  const timespec tick{0, 10'000'000};
  while (!drained.load(std::memory_order_acquire)) {
    if (sigtimedwait(&set, nullptr, &tick) > 0) {
      ic::config::log(LogLevel::warn, "second signal: stopping without waiting for calls");
      return;
    }
  }
}

int run(const ServerConfig& config) {
  const sigset_t term = signal_set({SIGTERM, SIGINT});

  App app(config);
  if (!app.load_policies() || !app.load_tls() || !app.load_tokenizer_models()) return kExitUsage;
  app.build_shards();
  app.load_state();
  if (std::string error = app.add_listeners(); !error.empty()) {
    ic::config::log(LogLevel::error, "cannot listen", {{"error", error}});
    return kExitStartup;
  }
  app.install_collectors();
  app.runtime.start([&app](unsigned core) { app.start_core(core); });
  if (app.replicator) app.replicator->start();
  if (app.state_saver) app.state_saver->start();

  const int sig = serve_signals(app);
  ic::config::log(LogLevel::info, "shutting down",
                  {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"},
                   {"grace_ms", config.shutdown_grace_us / 1000},
                   {"grpc_connections", app.server.stats("grpc")->open.load()}});
  app.readiness.set_draining();
  app.registry.set_server_up(false);
  std::atomic<bool> drained{false};
  // Only gRPC drains; the admin listeners answer until the reactors stop.
  app.server.shutdown(config.shutdown_grace_us,
                      [&drained] { drained.store(true, std::memory_order_release); }, {"grpc"});
  wait_drained(drained, term);
  if (app.state_saver) app.state_saver->stop();  // before the cores stop taking its slices
  if (app.replicator) app.replicator->stop();    // likewise for the stream's records
  app.runtime.stop();
  app.runtime.join();
  app.save_final_state();
  ic::config::log(LogLevel::info, "stopped", {{"exit_code", 0}});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Signals are taken synchronously by the main thread; every thread started
  // later (log writer, reactors) inherits the blocked mask, so SIGHUP can
  // never kill the server, not even during startup (it stays pending and is
  // served once the server runs). Sends use MSG_NOSIGNAL; SIGPIPE is ignored.
  const sigset_t blocked = signal_set({SIGTERM, SIGINT, SIGHUP});
  pthread_sigmask(SIG_BLOCK, &blocked, nullptr);
  signal(SIGPIPE, SIG_IGN);
  const ic::config::FlagsOutcome flags = ic::config::parse_flags(argc, argv);
  if (!flags.config) {
    const bool newline = flags.message.empty() || flags.message.back() != '\n';
    std::fprintf(flags.exit_code == 0 ? stdout : stderr, "%s%s", flags.message.c_str(),
                 newline ? "\n" : "");
    return flags.exit_code;
  }
  const ServerConfig& config = *flags.config;
  if (std::string error = check_addresses(config); !error.empty()) {
    std::fprintf(stderr, "inferencecache-server: %s\n", error.c_str());
    return kExitUsage;
  }
  ic::config::configure_logging(config.log_format, config.log_level);
  ic::config::start_log_writer();
  const int code = run(config);
  ic::config::stop_log_writer();
  return code;
}
