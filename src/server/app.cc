// App: loading, wiring and starting the server's parts (server/app.hh).

#include "server/app.hh"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <unistd.h>

#include <mimalloc.h>

#include <cstdio>
#include <functional>

#include "admin/auth.hh"
#include "admin/server.hh"
#include "base/log.hh"
#include "buildinfo/build_info.hh"
#include "gateway/ext_proc.hh"
#include "gateway/gateway_metrics.hh"
#include "index/from_flags.hh"
#include "metrics/labels.hh"
#include "metrics/scrape.hh"
#include "net/address.hh"
#include "net/tls.hh"
#include "rpc/peer_limit_metrics.hh"
#include "service/inference_cache.hh"
#include "sharding/pd_metrics.hh"
#include "sharding/replica_hit_metrics.hh"
#include "templates/template_metrics.hh"

namespace ic::server {

namespace {

using ic::base::LogLevel;

std::vector<ic::index::Shard*> shard_pointers(
    const std::vector<std::unique_ptr<ic::index::Shard>>& shards) {
  std::vector<ic::index::Shard*> out;
  for (const auto& shard : shards) out.push_back(shard.get());
  return out;
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

// Runs a load with mimalloc handing freed pages back at once: the load's
// batches, and the tables its threads outgrew, are freed on threads that end
// with the load, where a delayed decommit would never run and the pages would
// stay resident (docs/persistence.md "Bounds": restored ≈ ingested memory).
ic::persist::LoadOutcome load_returning_pages(
    const std::function<ic::persist::LoadOutcome()>& load) {
  const long delay = mi_option_get(mi_option_decommit_delay);
  const long segment_delay = mi_option_get(mi_option_segment_decommit_delay);
  mi_option_set(mi_option_decommit_delay, 0);
  mi_option_set(mi_option_segment_decommit_delay, 0);
  ic::persist::LoadOutcome got = load();
  mi_collect(true);
  mi_option_set(mi_option_decommit_delay, delay);
  mi_option_set(mi_option_segment_decommit_delay, segment_delay);
  return got;
}

// --nats-tls-* (docs/replication.md "Who may publish").
ic::replication::NatsTls nats_tls(const ServerConfig& config) {
  return {config.nats_tls_ca_file, config.nats_tls_cert_file, config.nats_tls_key_file};
}

}  // namespace

// Rejects unparsable listen addresses with the flag name (exit 2).
std::string check_addresses(const ServerConfig& config) {
  const std::pair<const char*, const std::string*> flags[] = {
      {"--grpc-bind-address", &config.grpc_bind_address},
      {"--http-bind-address", &config.http_bind_address},
      {"--snapshot-bind-address", &config.snapshot_bind_address},
      {"--gateway-listen", &config.gateway_listen},  // "" = the gRPC port's
  };
  for (const auto& [flag, value] : flags) {
    if (value == &config.gateway_listen && value->empty()) continue;
    std::string why;
    if (!ic::net::parse_address(*value, &why)) {
      return std::string(flag) + ": invalid address \"" + *value + "\": " + why;
    }
  }
  return {};
}

ic::runtime::BackendChoice backend_choice(ic::config::ReactorBackend flag) {
  switch (flag) {
    case ic::config::ReactorBackend::kIoUring:
      return ic::runtime::BackendChoice::kIoUring;
    case ic::config::ReactorBackend::kEpoll:
      return ic::runtime::BackendChoice::kEpoll;
    case ic::config::ReactorBackend::kAuto:
      break;
  }
  return ic::runtime::BackendChoice::kAuto;
}

void App::register_metrics() {
  registry.add_group(ic::persist::metric_group(persist_stats));
  registry.add_group(ic::replication::metric_group(replication_stats));
  ic::rpc::register_peer_limit_metrics(registry);
  ic::templates::register_template_metrics(registry);
  ic::gateway::register_gateway_metrics(registry);
  ic::sharding::register_replica_hit_metrics(registry);
  ic::sharding::register_pd_metrics(registry);
}

bool App::load_policies() {
  initial_policies = ic::config::PolicySet::defaults();
  if (config.policy_file.empty()) return true;
  policy_file = std::make_unique<ic::config::PolicyStore>(config.policy_file);
  if (!policy_file->load()) {
    ic::base::log(LogLevel::error, "bad flag value",
                  {{"error", "--policy-file: " + policy_file->last_error()}});
    return false;
  }
  initial_policies = policy_file->current();
  return true;
}

// --nats-creds-file that is not a credentials file is a bad flag value (exit
// 2): the NATS client reads it only when it connects, and would retry forever.
bool App::check_nats_creds() {
  if (config.nats_creds_file.empty()) return true;
  const std::string error = ic::replication::check_creds_file(config.nats_creds_file);
  if (error.empty()) return true;
  ic::base::log(LogLevel::error, "bad flag value", {{"error", error}});
  return false;
}

// --tls-cert-file/--tls-key-file: gRPC over TLS with ALPN h2. An unusable
// certificate or key is a bad flag value (exit 2).
bool App::load_tls() {
  if (config.tls_cert_file.empty()) return true;
  std::string error;
  tls = std::make_unique<ic::net::TlsCertificateStore>(config.tls_cert_file, config.tls_key_file,
                                                       std::vector<std::string>{"h2"});
  if (!tls->load(&error)) {
    ic::base::log(LogLevel::error, "bad flag value", {{"error", error}});
    return false;
  }
  registry.set_grpc_tls_enabled(true);
  return true;
}

// --tokenizer-models-dir: every model subdirectory, loaded once; a model
// that does not load is logged and left out (its prompt_text lookups fail
// open). A directory that cannot be listed is a bad flag value (exit 2).
bool App::load_tokenizer_models() {
  const ic::index::IndexConfig limits = ic::index::index_config(config);
  prompt_text.models = &tokenizer_models;
  prompt_text.max_prompt_bytes = limits.max_prompt_bytes;
  prompt_text.max_token_ids = limits.max_token_ids;
  gateway.models = &tokenizer_models;
  gateway.tenant_header = config.gateway_tenant_header;
  gateway.default_tenant = config.gateway_default_tenant;
  gateway.hash_scheme = config.gateway_hash_scheme;
  gateway.body_mode = static_cast<ic::gateway::BodyMode>(config.gateway_body_mode);
  gateway.max_body_bytes = config.gateway_max_body_bytes;
  gateway.max_token_ids = limits.max_token_ids;
  gateway.tokenize_budget_us = config.gateway_tokenize_budget_us;
  gateway.max_endpoints = config.gateway_max_endpoints;
  gateway.shed_queue_us = config.gateway_shed_queue_us;
  prompt_text.max_cpu_us = config.prompt_text_max_cpu_us;
  prompt_text.max_jobs_per_core = config.prompt_text_max_jobs;
  prompt_text.max_jobs_per_tenant = config.prompt_text_max_jobs_per_tenant;
  if (config.tokenizer_models_dir.empty()) return true;
  std::vector<ic::prompt_text::LoadReport> reports;
  std::string error;
  if (!tokenizer_models.load_dir(config.tokenizer_models_dir, reports, error)) {
    ic::base::log(LogLevel::error, "bad flag value",
                  {{"error", "--tokenizer-models-dir: " + error}});
    return false;
  }
  for (const auto& r : reports) {
    if (r.loaded) {
      ic::base::log(LogLevel::info, "tokenizer model loaded",
                    {{"model", r.model_id}, {"detail", r.detail}});
    } else {
      ic::base::log(LogLevel::warn, "tokenizer model not loaded: prompt_text fails open for it",
                    {{"model", r.model_id},
                     {"folder", config.tokenizer_models_dir + "/" + r.model_id},
                     {"error", r.detail}});
    }
  }
  ic::base::log(LogLevel::info, "tokenizer models",
                {{"dir", config.tokenizer_models_dir}, {"loaded", tokenizer_models.size()}});
  return true;
}

void App::build_shards() {
  for (unsigned core = 0; core < runtime.cores(); ++core) {
    shards.push_back(std::make_unique<ic::index::Shard>(ic::index::index_config(config),
                                                        &index_globals, initial_policies));
  }
  std::vector<ic::index::Shard*> shard_ptrs;
  for (auto& shard : shards) shard_ptrs.push_back(shard.get());
  index = std::make_unique<ic::sharding::ShardedIndex>(runtime, shard_ptrs, clock);
  if (!config.spread_tenants.empty()) {
    placement = std::make_unique<ic::placement::SpreadPlacement>(
        runtime, std::move(shard_ptrs), ic::index::index_config(config), &index_globals,
        initial_policies,
        ic::placement::SpreadOptions{.tenants = config.spread_tenants,
                                     .cores_per_tenant = config.spread_cores});
    index->set_placement(placement.get());
  }
  ic::service::EventStreamLimits event_limits;
  event_limits.max_subscriptions = config.events_stream_max_subscribers;
  events = std::make_unique<ic::service::EventFanout>(*index, event_limits);
  grpc_servers.resize(runtime.cores());
  grpc_factories.resize(runtime.cores());
  idle_collect = std::vector<IdleCollect>(runtime.cores());
  prompt_schedulers.resize(runtime.cores());
  gateway_servers.resize(runtime.cores());
  gateway_factories.resize(runtime.cores());
}

// --state-file: restore the index before any listener is up (so /readyz only
// says ready with it loaded); with --nats-url, a snapshot another server
// published when the file gives nothing of this stream, and the group's kept
// policy (docs/replication.md "Restart"). Policy: --policy-file wins;
// otherwise the newest of the saved and the kept one comes back.
std::optional<int> App::load_state() {
  ic::persist::LoadOutcome got;
  if (!config.state_file.empty()) {
    if (std::optional<int> stop = lock_state_file()) return stop;
    got = load_state_file();
    if (got.interrupted) {
      ic::base::log(LogLevel::info, "stopped during start-up: state file load interrupted",
                    {{"path", config.state_file}});
      return 0;
    }
  }
  if (!config.nats_url.empty()) load_from_stream(got);
  // Spread tenants' copies start as their owners' loaded state.
  if (placement) placement->seed_copies();
  start_replication(got);
  if (config.state_file.empty()) return std::nullopt;
  ic::persist::StateSaver::Options options;
  if (replicator) {
    options.stream_position = [this] { return replicator->position(); };
    options.on_saved = [this] { replicator->publish_snapshot(config.state_file); };
  }
  options.path = config.state_file;
  options.templates_json = [this] { return templates->latest()->source_json(); };
  options.interval_us = config.state_save_interval_us;
  options.server_version = IC_SERVER_VERSION;
  state_saver = std::make_unique<ic::persist::StateSaver>(options, runtime, shard_pointers(shards),
                                                          persist_stats);
  return std::nullopt;
}

// One server per --state-file (docs/persistence.md "One server per file"): a
// second one is refused (exit 1) before it reads or writes anything.
std::optional<int> App::lock_state_file() {
  std::string error;
  state_lock = ic::persist::StateLock::acquire(config.state_file, &error);
  if (!state_lock) {
    ic::base::log(LogLevel::error, "state file in use by another server: not starting",
                  {{"path", config.state_file}, {"error", error}});
    return kExitStartup;
  }
  if (const std::size_t removed = state_lock->remove_stale_temps(); removed > 0) {
    ic::base::log(LogLevel::info, "state file: removed temp files of interrupted saves",
                  {{"path", config.state_file}, {"removed", removed}});
  }
  return std::nullopt;
}

ic::persist::LoadOutcome App::load_state_file() {
  persist_stats.set_enabled();
  ic::persist::LoadOptions options;
  options.max_file_bytes = ic::persist::state_file_limit(config.index_max_entries);
  // SIGTERM/SIGINT are blocked (taken by sigtimedwait later): a pending one
  // stops the load at the next record.
  options.interrupted = [] {
    sigset_t pending;
    sigpending(&pending);
    return sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1;
  };
  ic::persist::LoadOutcome got = load_returning_pages([&] {
    return ic::persist::load_state(config.state_file, shard_pointers(shards), clock.wall_us(),
                                   options);
  });
  if (got.interrupted) return got;
  const std::string_view result = ic::persist::load_status_name(got.status);
  persist_stats.record_load(static_cast<int>(got.status), got.entries);
  if (got.status != ic::persist::LoadStatus::kOk) {
    ic::base::log(
        got.status == ic::persist::LoadStatus::kMissing ? LogLevel::info : LogLevel::warn,
        "state file not loaded: starting cold",
        {{"path", config.state_file}, {"result", std::string(result)}, {"error", got.error}});
    if (got.status != ic::persist::LoadStatus::kMissing) keep_state_file_aside();
  } else {
    ic::base::log(LogLevel::info, "state file loaded",
                  {{"path", config.state_file},
                   {"entries", got.entries},
                   {"file_entries", got.file_entries},
                   {"written_by", got.server_version},
                   {"age_s", (clock.wall_us() - got.created_at_us) / 1'000'000}});
    install_saved_policy(got.policy_json, "saved");
    install_saved_templates(got.templates_json, "saved");
  }
  return got;
}

// A file that did not load is renamed, never replaced by the next save.
void App::keep_state_file_aside() {
  const std::int64_t now_s = clock.wall_us() / 1'000'000;
  if (std::string error = ic::persist::keep_aside(config.state_file, now_s); !error.empty()) {
    ic::base::log(LogLevel::warn, "state file not kept aside", {{"error", error}});
    return;
  }
  ic::base::log(LogLevel::warn, "state file kept aside",
                {{"path", config.state_file},
                 {"kept_as", ic::persist::kept_aside_path(config.state_file, now_s)}});
}

// A policy document from a state file, a snapshot or the group's kept one;
// --policy-file wins over all of them.
void App::install_saved_policy(const std::string& json, std::string_view source) {
  if (policy_file || json.empty()) return;
  ic::config::PolicyParseResult parsed = ic::config::parse_policy_json(json);
  if (!parsed.ok()) {
    ic::base::log(LogLevel::warn, "policy rejected: using the current one",
                  {{"source", std::string(source)}, {"error", parsed.error}});
    return;
  }
  for (unsigned core = 0; core < shards.size(); ++core) index->set_policies(core, parsed.set);
}

// Before the reactors start, bounded (docs/replication.md "Restart").
void App::load_from_stream(ic::persist::LoadOutcome& got) {
  const bool have_position =
      got.status == ic::persist::LoadStatus::kOk && got.stream_name == config.nats_stream;
  ic::replication::Bootstrap fetched =
      ic::replication::fetch_bootstrap(config.nats_url, nats_tls(config), config.nats_creds_file,
                                       config.nats_stream, !have_position, std::chrono::seconds(5));
  if (!fetched.reached) {
    ic::base::log(LogLevel::warn, "replication: no snapshot or kept policy fetched",
                  {{"error", fetched.error}});
    return;
  }
  if (fetched.manifest) {
    ic::persist::LoadOutcome snap = load_returning_pages([&] {
      return ic::persist::load_state_bytes(fetched.state_file, shard_pointers(shards),
                                           clock.wall_us());
    });
    if (snap.status == ic::persist::LoadStatus::kOk && snap.stream_name == config.nats_stream) {
      ic::base::log(LogLevel::info, "replication: snapshot loaded",
                    {{"snapshot", fetched.manifest->snapshot_id()},
                     {"entries", snap.entries},
                     {"stream_sequence", snap.stream_sequence}});
      replication_stats.set_snapshot_loaded(snap.stream_sequence);
      install_saved_policy(snap.policy_json, "snapshot");
      install_saved_templates(snap.templates_json, "snapshot");
      got = std::move(snap);
    } else {
      ic::base::log(LogLevel::warn, "replication: snapshot not loaded",
                    {{"result", std::string(ic::persist::load_status_name(snap.status))},
                     {"error", snap.error}});
    }
  } else if (!have_position && !fetched.error.empty()) {
    ic::base::log(LogLevel::warn, "replication: snapshot not read", {{"error", fetched.error}});
  }
  const std::uint64_t position =
      got.status == ic::persist::LoadStatus::kOk && got.stream_name == config.nats_stream
          ? got.stream_sequence
          : 0;
  if (fetched.policy && fetched.policy->stream_sequence() > position) {
    ic::base::log(LogLevel::info, "replication: kept policy installed",
                  {{"stream_sequence", fetched.policy->stream_sequence()}});
    install_saved_policy(fetched.policy->json(), "kept");
  }
  if (fetched.templates && fetched.templates->stream_sequence() > position) {
    ic::base::log(LogLevel::info, "replication: kept templates installed",
                  {{"stream_sequence", fetched.templates->stream_sequence()}});
    install_saved_templates(fetched.templates->json(), "kept");
  }
}

// --nats-url (docs/replication.md): resume the stream after the loaded state
// file's (or snapshot's) position when it names this stream, else from its start.
void App::start_replication(const ic::persist::LoadOutcome& loaded) {
  if (config.nats_url.empty()) return;
  ic::replication::ReplicatorOptions options;
  options.url = config.nats_url;
  options.stream = config.nats_stream;
  options.tls = nats_tls(config);
  options.creds_file = config.nats_creds_file;
  options.buffer_bytes = config.nats_buffer_bytes;
  options.max_age_us = config.index_ttl_us;
  // /readyz waits for the catch-up (docs/replication.md "Readiness").
  readiness.set_catching_up(true);
  options.on_caught_up = [this] { readiness.set_catching_up(false); };
  options.on_templates = [this](std::uint64_t sequence, const std::string& json) {
    replicated_templates(sequence, json);
  };
  options.startup_wait_us = config.nats_startup_wait_us;
  options.snapshot_interval_us = config.nats_snapshot_interval_us;
  options.snapshot_max_bytes = config.nats_snapshot_max_bytes;
  if (loaded.status == ic::persist::LoadStatus::kOk && loaded.stream_name == config.nats_stream) {
    options.resume_after = loaded.stream_sequence;
    options.resume_stream_created_ns = loaded.stream_created_ns;
  }
  replicator = std::make_unique<ic::replication::Replicator>(options, *index, replication_stats);
  index->set_observer(replicator.get());
}

// After the reactors joined: the exact final snapshot.
void App::save_final_state() {
  if (!state_saver) return;
  if (std::string error = state_saver->save_stopped(); !error.empty()) {
    ic::base::log(LogLevel::error, "state file not saved at shutdown",
                  {{"path", config.state_file}, {"error", error}});
  } else {
    ic::base::log(LogLevel::info, "state file saved", {{"path", config.state_file}});
  }
}

std::string App::add_listeners() {
  ic::net::ListenerOptions grpc;
  grpc.name = "grpc";
  grpc.address = config.grpc_bind_address;
  grpc.max_connections = config.max_connections;
  grpc.idle_timeout_us = config.idle_timeout_us;
  grpc.max_connection_age_us = config.max_connection_age_us;
  grpc.max_connection_age_grace_us = config.max_connection_age_grace_us;
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
  if (std::string e = add_gateway_listener(); !e.empty()) return e;

  auto admin = std::make_shared<ic::admin::AdminContext>();
  admin->runtime = &runtime;
  admin->registry = &registry;
  admin->readiness = &readiness;
  admin->collect_snapshot = [this](unsigned core) { return shards[core]->collect_snapshot(); };
  admin->apply_policy = [this](unsigned core,
                               std::shared_ptr<const ic::config::PolicySet> policies) {
    // Core 0's install stands for the whole push: replicated once.
    if (core == 0 && replicator) replicator->accepted_policy(policies->source_json());
    index->set_policies(core, policies);
  };
  admin->current_policy = [this](unsigned core) { return shards[core]->policies(); };
  admin->apply_templates = [this](unsigned core,
                                  std::shared_ptr<const ic::templates::TemplateSet> set) {
    // Core 0's install stands for the whole push: replicated and saved once.
    if (core == 0) {
      if (replicator) replicator->accepted_templates(set->source_json());
      templates->set_latest(set);
    }
    templates->install_on_core(core, std::move(set));
  };
  admin->current_templates = [this] { return templates->latest(); };
  admin->default_block_size = static_cast<std::int32_t>(config.engine_block_size);
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

// --gateway-listen: the endpoint picker on a listener of its own (the gRPC
// listener's limits and TLS), served by gateway_servers.
std::string App::add_gateway_listener() {
  if (!config.gateway || config.gateway_listen.empty()) return {};
  ic::net::ListenerOptions picker;
  picker.name = "gateway";
  picker.address = config.gateway_listen;
  picker.max_connections = config.max_connections;
  picker.idle_timeout_us = config.idle_timeout_us;
  picker.max_connection_age_us = config.max_connection_age_us;
  picker.max_connection_age_grace_us = config.max_connection_age_grace_us;
  picker.output_high_water = std::size_t{4} << 20;
  picker.factory = [this](ic::net::Connection& conn) {
    return gateway_factories[conn.core()](conn);
  };
  if (tls) {
    ic::net::TlsCertificateStore* store = tls.get();
    picker.factory = ic::net::tls_session_factory([store] { return store->current(); },
                                                  std::move(picker.factory));
  }
  std::string e = server.add_listener(std::move(picker));
  return e.empty() ? e : "--gateway-listen: " + e;
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
      m.set_index_stats_refused(shard.stats_refused());
      m.set_core_index_entries(shard.entry_count());
      ic::sharding::add_replica_hits(m, shard);
      std::int64_t depth = 0;
      for (unsigned from = 0; from < runtime.cores(); ++from) {
        depth += static_cast<std::int64_t>(runtime.mailbox_depth(from, core));
      }
      m.set_mailbox_depth(depth);
      m.set_ring_setup_flags(runtime.reactor(core).ring_setup_flags());
    });
  }
}

std::string App::start_runtime() {
  return runtime.start([this](unsigned core) { start_core(core); });
}

// One TTL pass in bounded slices, one slice per loop turn, then wait for the
// next interval (docs/index.md "Expiry": never stall the core).
void App::sweep_index(unsigned core) {
  ic::runtime::Reactor& reactor = runtime.reactor(core);
  const bool pass_done =
      shards[core]->sweep_slice(reactor.wall_us(), ic::index::Shard::kSweepSliceEntries);
  reactor.add_timer(pass_done ? config.sweep_interval_us : 0, [this, core] { sweep_index(core); });
}

void App::start_core(unsigned core) {
  registry.bind_current_thread(core);
  ic::service::GrpcServiceOptions opts;
  opts.grpc.max_message_bytes = config.max_message_bytes;
  opts.grpc.h2.max_concurrent_streams = config.max_concurrent_streams;
  opts.grpc.h2.reset_burst = config.stream_reset_burst;
  opts.grpc.h2.reset_rate_per_s = config.stream_reset_rate;
  opts.ready = [this] { return readiness.ready(); };
  opts.index = index.get();
  opts.events = events.get();
  opts.scrape_metrics = [this](auto done) { ic::metrics::scrape(runtime, registry, done); };
  opts.metrics_interval_us = config.metrics_stream_interval_us;
  opts.metric_subscribers = &metric_subscribers;
  opts.prompt_text = &prompt_text;
  // One scheduler of tokenizing jobs for the core, shared by LookupRoute's
  // prompt_text, RenderTemplate and the endpoint picker, so its per-turn
  // slice, tenant turns and admission bounds hold across the three.
  prompt_schedulers[core] = std::make_shared<ic::prompt_text::Scheduler>(
      runtime, clock, prompt_text.slice_us, prompt_text.max_jobs_per_core,
      prompt_text.max_jobs_per_tenant);
  ic::prompt_text::Scheduler* scheduler = prompt_schedulers[core].get();
  opts.prompt_scheduler = scheduler;
  opts.add_methods = [this, scheduler](ic::rpc::MethodTable& methods, ic::rpc::Timers&) {
    methods.add("/" + std::string(ic::service::kInferenceCacheService) + "/RenderTemplate",
                ic::templates::render_template_method(render_service, scheduler));
    if (config.gateway && index && config.gateway_listen.empty())
      ic::gateway::add_ext_proc(methods, gateway, *index, scheduler);
  };
  grpc_servers[core] = std::make_unique<ic::service::CoreGrpcServer>(opts, runtime.reactor(core));
  grpc_factories[core] = grpc_servers[core]->session_factory();
  if (config.gateway && index && !config.gateway_listen.empty()) {
    // The picker's own listener: ext_proc, health and reflection only.
    ic::service::GrpcServiceOptions picker;
    picker.grpc = opts.grpc;
    picker.ready = opts.ready;
    picker.inference_cache = false;
    picker.add_methods = [this, scheduler](ic::rpc::MethodTable& methods, ic::rpc::Timers&) {
      ic::gateway::add_ext_proc(methods, gateway, *index, scheduler);
    };
    gateway_servers[core] =
        std::make_unique<ic::service::CoreGrpcServer>(picker, runtime.reactor(core));
    gateway_factories[core] = gateway_servers[core]->session_factory();
  }
  runtime.reactor(core).add_timer(config.sweep_interval_us, [this, core] { sweep_index(core); });
  idle_collect[core].start(runtime.reactor(core));
  if (core == 0 && policy_file) {
    runtime.reactor(0).add_timer(kPolicyPollUs, [this] { poll_policy_file(); });
  }
  if (core == 0 && templates_file) {
    runtime.reactor(0).add_timer(kPolicyPollUs, [this] { poll_templates_file(); });
  }
  server.start_core(core);  // listeners last
  readiness.core_serving(core);
  if (cores_serving.fetch_add(1) + 1 == runtime.cores()) {
    registry.set_server_up(true);
    log_serving();
  }
}

void App::log_serving() {
  // Details and warnings first: once the "serving" line is out, they are too.
  if (tls) {
    const auto ctx = tls->current();
    ic::base::log(
        LogLevel::info, "TLS certificate loaded",
        {{"path", tls->cert_file()}, {"subject", ctx->subject()}, {"not_after", ctx->not_after()}});
  }
  if (config.insecure_disable_auth && !loopback_only(config.snapshot_bind_address)) {
    ic::base::log(LogLevel::warn, "control listener has no auth and is reachable from other hosts",
                  {{"snapshot_address", config.snapshot_bind_address},
                   {"hint",
                    "anyone who can connect may read /snapshot and replace the policy via "
                    "/policy; bind --snapshot-bind-address to 127.0.0.1 or use "
                    "--control-token-file"}});
  }
  if (!runtime.fallback_reason().empty()) {
    ic::base::log(LogLevel::warn, "io_uring refused: running on epoll",
                  {{"cause", runtime.fallback_reason()}, {"hint", kIoUringHint}});
  }
  const ic::buildinfo::BuildInfo& build = ic::buildinfo::build_info();
  ic::base::log(
      LogLevel::info, "serving",
      {{"version", build.version},
       {"commit", build.git_commit},
       {"build", build.build_type},
       {"grpc_address", config.grpc_bind_address},
       {"grpc_port", server.port("grpc")},
       {"gateway_address", config.gateway_listen},
       {"gateway_port", server.port("gateway")},
       {"http_address", config.http_bind_address},
       {"http_port", server.port("http")},
       {"snapshot_address", config.snapshot_bind_address},
       {"snapshot_port", server.port("snapshot")},
       {"tls", tls != nullptr},
       {"auth", auth_mode(config)},
       {"threads", runtime.cores()},
       {"reactor_backend", ic::runtime::backend_name(runtime.backend())},
       {"io_uring_setup", ic::runtime::ring_setup_names(runtime.reactor(0).ring_setup_flags())},
       {"policy_file", config.policy_file},
       {"pid", static_cast<long>(::getpid())}});
}

}  // namespace ic::server
