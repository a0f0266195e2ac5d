#pragma once
// Command-line flags of inferencecache-server and the ServerConfig they build.
// Names and defaults of the operator-facing flags are fixed by docs/admin.md
// ("keep these names: operators' manifests already use them"); the rest are
// ours and documented in `--help`. Go-style single-dash spellings
// (`-grpc-bind-address`) are accepted too, since the manifests came from a Go
// server.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.hh"
#include "config/policy.hh"

namespace ic::config {

// The logger lives in src/base/ (net and rpc use it without the flags);
// --log-format and --log-level name its types.
using base::LogFormat;
using base::LogLevel;

// --reactor-backend (docs/architecture.md "Reactor backends"): kAuto is
// io_uring, or epoll when this process may not use io_uring.
enum class ReactorBackend : std::uint8_t { kAuto, kIoUring, kEpoll };

// --gateway-body-mode (docs/gateway.md "Body modes"): the request body mode of
// the gateway's ext_proc filter, used when Envoy does not say it.
enum class GatewayBodyMode : std::uint8_t { kFullDuplex, kBuffered, kStreamed };

// Everything the composition root (src/main.cc) and the subsystems read.
// Durations are µs; sizes are bytes.
struct ServerConfig {
  // Listeners (docs/admin.md "Listeners"): "[host]:port", host may be
  // "a.b.c.d", "[v6]" or empty (all interfaces).
  std::string grpc_bind_address = ":9090";
  std::string http_bind_address = ":8080";
  std::string snapshot_bind_address = ":8081";
  // TLS for the gRPC listener: both or neither (docs/contract.md).
  std::string tls_cert_file;
  std::string tls_key_file;
  // Tokens per KV block assumed when chunking token ids (docs/lookup.md).
  std::uint32_t engine_block_size = 16;
  // Tokenizer models for prompt_text; empty: prompt_text fails open.
  std::string tokenizer_models_dir;
  LogFormat log_format = LogFormat::json;
  LogLevel log_level = LogLevel::info;
  // Serves /snapshot and /policy without a bearer token.
  bool insecure_disable_auth = false;

  // Reactor threads; 0 = one per CPU this process may run on.
  unsigned threads = 0;
  // Pin reactor i to the i-th allowed CPU. Best on a dedicated host; on a
  // CPU-oversubscribed one, pinned reactors cannot dodge busy CPUs.
  bool pin_threads = true;
  // What the reactors wait and do their I/O with.
  ReactorBackend reactor_backend = ReactorBackend::kAuto;
  // Largest gRPC message accepted, bytes (docs/contract.md: 4 MiB).
  std::uint32_t max_message_bytes = 4u << 20;
  // HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS per connection.
  std::uint32_t max_concurrent_streams = 1024;
  // Rapid reset (CVE-2023-44487, docs/hostile-peers.md "Costly peers"): the
  // RST_STREAM frames a client may send, a token bucket of this burst refilled
  // at this rate per second; over it the connection gets GOAWAY. Raise both
  // for gateways that cancel many calls (deadlines expiring under overload).
  std::uint32_t stream_reset_burst = 200;
  std::uint32_t stream_reset_rate = 33;
  // Open connections per listener; more are accepted and closed at once.
  std::uint32_t max_connections = 10000;
  // Close a connection with nothing in flight after this long without
  // traffic, µs; 0 disables.
  std::int64_t idle_timeout_us = 5 * 60 * 1'000'000LL;
  // A gRPC connection older than this (µs, each connection's own age jittered
  // by up to ±10%) gets GOAWAY, so clients reconnect and spread over the
  // servers a scale-out added (grpc-go's MaxConnectionAge); 0 disables.
  std::int64_t max_connection_age_us = 0;
  // After that GOAWAY, in-flight calls get this long (µs) before the
  // connection is closed (grpc-go's MaxConnectionAgeGrace).
  std::int64_t max_connection_age_grace_us = 10 * 1'000'000LL;
  // How long SIGTERM/SIGINT waits for in-flight calls before closing, µs.
  std::int64_t shutdown_grace_us = 10 * 1'000'000LL;
  // Index entry time-to-live (docs/index.md "Expiry"), µs.
  std::int64_t index_ttl_us = 30 * 60 * 1'000'000LL;
  // Global cap on (key, replica) entries (docs/index.md "Global cap").
  std::uint64_t index_max_entries = 1'000'000;
  // Period of the TTL sweep, µs.
  std::int64_t sweep_interval_us = 60 * 1'000'000LL;
  // Ranking of tenants whose policy does not choose one (docs/ranking.md).
  Ranking ranking = Ranking::kWorkAware;
  // Work-aware knobs (docs/ranking.md "Knobs"): the prefill rate until one is learned, the
  // booking bound until a completion is timed, the weight of the request's own prefill.
  WorkAwareKnobs work_aware{};
  // Load-aware knobs of tenants whose policy leaves them out (docs/ranking.md
  // "Knobs"): tokens per unit of load, hint memory, load of pressure 1.0,
  // saturation pressure.
  LoadAwareKnobs load_aware{512.0, 64.0, 16.0, 1.0};
  // Period of StreamMetrics samples (docs/streams.md "StreamMetrics"), µs;
  // at least 100 ms.
  std::int64_t metrics_stream_interval_us = 10 * 1'000'000LL;
  // Open StreamCacheEvents / StreamMetrics calls per server, all cores
  // together; one more ends at once with RESOURCE_EXHAUSTED (docs/streams.md
  // "Slow subscribers": each holds at most about 2 MiB).
  std::uint32_t events_stream_max_subscribers = 128;
  std::uint32_t metrics_stream_max_subscribers = 128;
  // prompt_text bounds (docs/prompt-text.md "Where it runs and its bounds"):
  // the tokenizing work one call may take, µs summed over its slices (past
  // it: fails open, cpu_budget); calls waiting or being tokenized per core,
  // and per tenant per core (one more: fails open at once, busy).
  std::int64_t prompt_text_max_cpu_us = 50'000;
  std::uint32_t prompt_text_max_jobs = 64;
  std::uint32_t prompt_text_max_jobs_per_tenant = 8;
  // CachePolicy JSON loaded at start (docs/policy.md); empty: defaults.
  std::string policy_file;
  // Prompt-template JSON loaded at start and on SIGHUP (docs/templates.md);
  // empty: none until POST /templates.
  std::string templates_file;
  // File holding the bearer token for the control listener (/snapshot,
  // /policy); empty with auth enabled: every control request is refused.
  std::string control_token_file;
  // Warm restart (docs/persistence.md): the index, stats and policy are loaded
  // from here at startup and written every state_save_interval_us and at
  // shutdown; empty = off. Its directory must exist.
  std::string state_file;
  std::int64_t state_save_interval_us = 60 * 1'000'000LL;
  // Replication through NATS JetStream (docs/replication.md): the server URL
  // ("nats://host:4222", comma-separated for a cluster); empty = off.
  std::string nats_url;
  // The JetStream stream every server appends to and applies (created when
  // missing, subjects "<stream>.changes").
  std::string nats_stream = "INFERENCECACHE";
  // TLS to NATS (docs/replication.md "Who may publish"): the CA bundle the
  // NATS server's certificate must chain to, and a client certificate and
  // key for a NATS server that verifies clients. Any of them turns TLS on.
  std::string nats_tls_ca_file;
  std::string nats_tls_cert_file;
  std::string nats_tls_key_file;
  // NATS credentials (docs/replication.md "Who may publish"): a `.creds` file
  // (user JWT and NKey seed) the servers authenticate to NATS with.
  std::string nats_creds_file;
  // Bytes of changes buffered for publishing while NATS is slow or away;
  // beyond it new changes are applied locally only and counted as dropped.
  std::uint64_t nats_buffer_bytes = std::uint64_t{64} << 20;
  // /readyz waits for the stream catch-up (docs/replication.md "Readiness");
  // when NATS was not reached within this time (µs) the server goes ready
  // from its local state.
  std::int64_t nats_startup_wait_us = 30 * 1'000'000LL;
  // Period (µs) of the index snapshots a server with --state-file publishes
  // to JetStream (docs/replication.md "Snapshots"); 0 = never.
  std::int64_t nats_snapshot_interval_us = 300 * 1'000'000LL;
  // A snapshot (state file) larger than this (bytes) is not published.
  std::uint64_t nats_snapshot_max_bytes = std::uint64_t{256} << 20;
  // Tenants whose LookupRoute is answered by read copies on several cores
  // (docs/placement.md); empty = every tenant on its owner core only.
  std::vector<std::string> spread_tenants;
  // Cores holding each spread tenant (its owner included); 0 = every core.
  unsigned spread_cores = 0;
  // The endpoint picker (Envoy ext_proc) on the gRPC port (docs/gateway.md "Flags").
  bool gateway = true;
  std::string gateway_tenant_header = "x-tenant-id";
  std::string gateway_default_tenant = "default";
  std::string gateway_hash_scheme = "vllm";
  GatewayBodyMode gateway_body_mode = GatewayBodyMode::kFullDuplex;
  std::uint32_t gateway_max_body_bytes = 4u << 20;
  std::int64_t gateway_tokenize_budget_us = 20'000;
  std::uint32_t gateway_max_endpoints = 4;
  // Its own listener, [host]:port; "" = the gRPC port (docs/gateway.md "Flags").
  std::string gateway_listen;
  // Answer 429 when every eligible endpoint has more prefill work queued; 0 = never.
  std::int64_t gateway_shed_queue_us = 0;
};

// Result of parsing argv: a config, or an exit code with the text to print.
struct FlagsOutcome {
  std::optional<ServerConfig> config;  // set when the server should run
  int exit_code = 0;                   // 0 for --help/--version, 2 for a bad command line
  // --help: the usage text; --version: buildinfo::version_text (both printed
  // to stdout by main); error: why, ONE line without a newline
  // ("--threads: want an integer in [0, 1024], got \"x\""), which main logs as
  // the one "bad flag value" error line (docs/admin.md "Exit statuses").
  std::string message;
  // On error: the --log-format the command line, environment or --config file
  // chose, as far as it can be read; json when that flag's own value is bad.
  LogFormat log_format = LogFormat::json;
};

// Parses and validates the command line (argv[0] is the program name). Each
// flag --x-y may also come from the environment variable INFERENCECACHE_X_Y
// (ignored when empty) and from the TOML file of --config (or
// INFERENCECACHE_CONFIG), "x-y = value"; the command line wins over the
// environment, the environment over the file, the file over the default.
// Unknown flags (or file keys), bad values and bad combinations give exit_code 2.
FlagsOutcome parse_flags(int argc, const char* const* argv);

// A flag value or combination the command line may not have; `why` is the
// one-line reason ("--log-level: want debug, info, warn or error, got \"x\"").
// Thrown by the value parsers below and by the tools' own checks
// (tools/kvevents/config.cc), each turning it into its exit-2 message.
struct FlagError {
  std::string why;
};

// --log-format's value: "json" or "text". Throws FlagError otherwise.
LogFormat parse_log_format(const std::string& text);
// --log-level's value: "debug", "info", "warn" or "error". Throws FlagError otherwise.
LogLevel parse_log_level(const std::string& text);

// `s` with its line breaks as spaces and trailing spaces dropped: a CLI11 or
// FlagError message as the one line an error outcome prints.
std::string one_line(std::string s);

// Parses a Go time.Duration string ("300ms", "1.5s", "1h30m", "0") into µs.
// Units ns, us, µs, ms, s, m, h; no sign; sub-µs rounds down. nullopt on error.
std::optional<std::int64_t> parse_duration_us(std::string_view text);

}  // namespace ic::config
