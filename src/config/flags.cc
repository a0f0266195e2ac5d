#include "config/flags.hh"

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include "buildinfo/build_info.hh"

namespace ic::config {

namespace {

constexpr std::string_view kProgram = "inferencecache-server";
// Environment variables are this prefix + the flag's name upper-cased, '-' as '_'.
constexpr std::string_view kEnvPrefix = "INFERENCECACHE_";

std::string quote_value(std::string_view s) { return "\"" + std::string(s) + "\""; }

// The value checks of the typed flags below return "" or why the value is refused (CLI11
// prefixes the flag: "--threads: want an integer in [0, 1024], got \"abc\"").
std::optional<std::uint64_t> read_uint(const std::string& text) {
  std::uint64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc{} || ptr != end) return std::nullopt;
  return v;
}

std::optional<double> read_number(const std::string& text) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc{} || ptr != end) return std::nullopt;
  return v;
}

std::string number_text(double v) {
  char out[32];
  std::snprintf(out, sizeof out, "%g", v);
  return out;
}

// Go's time.Duration form of `us` for --help's defaults: "0", "250ms", "10s", "5m", "1h30m".
std::string duration_text(std::int64_t us) {
  if (us == 0) return "0";
  if (us % 1000 != 0) return std::to_string(us) + "us";
  if (us % 1'000'000 != 0) return std::to_string(us / 1000) + "ms";
  std::int64_t s = us / 1'000'000;
  std::string out;
  if (s >= 3600) out += std::to_string(s / 3600) + "h";
  if (s % 3600 >= 60) out += std::to_string(s % 3600 / 60) + "m";
  if (s % 60 != 0) out += std::to_string(s % 60) + "s";
  return out;
}

// How one flag is read: its --help type and default, its value check and where a checked value
// goes. Built by the helpers below, one per kind of value.
struct FlagValue {
  enum class Shape { kValue, kSwitch, kList };
  Shape shape = Shape::kValue;
  std::string type;          // --help: "TEXT", "INT in [0, 1024]", "DURATION >= 1ms", "{json,text}"
  std::string default_text;  // --help: the ServerConfig default ("" shown as "")
  std::function<std::string(const std::string&)> check;  // "" or why not (kValue)
  std::function<void(const std::string&)> set;           // stores a checked value (kValue)
  bool* switch_out = nullptr;                            // kSwitch: present = true
  std::vector<std::string>* list_out = nullptr;          // kList: comma-separated
};

FlagValue text(std::string* out) {
  return {FlagValue::Shape::kValue, "TEXT", *out, [](const std::string&) { return std::string(); },
          [out](const std::string& v) { *out = v; }};
}

// A flag without value: present means true (also "--flag=false", "flag = true" in a file).
FlagValue on_off(bool* out) {
  FlagValue v;
  v.shape = FlagValue::Shape::kSwitch;
  v.type = "SWITCH";
  v.default_text = *out ? "on" : "off";
  v.switch_out = out;
  return v;
}

FlagValue list(std::vector<std::string>* out) {
  FlagValue v;
  v.shape = FlagValue::Shape::kList;
  v.type = "LIST";
  v.list_out = out;
  return v;
}

// "true" | "false" | "1" | "0" as a value.
FlagValue boolean(bool* out) {
  return {FlagValue::Shape::kValue, "{true,false}", *out ? "true" : "false",
          [](const std::string& t) {
            return t == "true" || t == "false" || t == "1" || t == "0"
                       ? std::string()
                       : "want true or false, got " + quote_value(t);
          },
          [out](const std::string& t) { *out = t == "true" || t == "1"; }};
}

template <typename T>
FlagValue uint_in(T* out, T min, T max) {
  const std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
  return {FlagValue::Shape::kValue, "INT in " + range, std::to_string(*out),
          [min, max, range](const std::string& t) {
            const auto v = read_uint(t);
            return v && *v >= min && *v <= max
                       ? std::string()
                       : "want an integer in " + range + ", got " + quote_value(t);
          },
          [out](const std::string& t) { *out = static_cast<T>(*read_uint(t)); }};
}

FlagValue number_in(double* out, double min, double max) {
  const std::string range = "[" + number_text(min) + ", " + number_text(max) + "]";
  return {FlagValue::Shape::kValue, "NUMBER in " + range, number_text(*out),
          [min, max, range](const std::string& t) {
            const auto v = read_number(t);
            return v && *v >= min && *v <= max
                       ? std::string()
                       : "want a number in " + range + ", got " + quote_value(t);
          },
          [out](const std::string& t) { *out = *read_number(t); }};
}

// A Go duration ("500ms", "1h30m") of at least `min_us`, stored in µs.
FlagValue duration_at_least(std::int64_t* out_us, std::int64_t min_us) {
  return {FlagValue::Shape::kValue,
          min_us > 0 ? "DURATION >= " + duration_text(min_us) : std::string("DURATION"),
          duration_text(*out_us),
          [min_us](const std::string& t) {
            const auto v = parse_duration_us(t);
            if (!v) {
              return "invalid duration " + quote_value(t) + " (want e.g. 500ms, 10s, 30m, 1h30m)";
            }
            return *v >= min_us
                       ? std::string()
                       : "must be at least " + duration_text(min_us) + ", got " + quote_value(t);
          },
          [out_us](const std::string& t) { *out_us = *parse_duration_us(t); }};
}

// One of the named values; `why` is the refusal without the value ("want json or text").
template <typename E>
FlagValue one_of(E* out, std::vector<std::pair<std::string, E>> names, std::string why) {
  std::string type = "{", default_text;
  for (const auto& [name, value] : names) {
    type += (type.size() > 1 ? "," : "") + name;
    if (value == *out) default_text = name;
  }
  type += "}";
  return {FlagValue::Shape::kValue, type, default_text,
          [names, why](const std::string& t) {
            for (const auto& entry : names) {
              if (entry.first == t) return std::string();
            }
            return why + ", got " + quote_value(t);
          },
          [out, names](const std::string& t) {
            for (const auto& [name, value] : names) {
              if (name == t) *out = value;
            }
          }};
}

void require_readable(std::string_view flag, const std::string& path) {
  if (path.empty()) return;
  if (::access(path.c_str(), R_OK) != 0) {
    throw FlagError{std::string(flag) + ": cannot read " + quote_value(path) + ": " +
                    std::strerror(errno)};
  }
}

// Go's flag package accepts "-name"; CLI11 wants "--name" for long names.
std::vector<std::string> normalize_args(int argc, const char* const* argv) {
  std::vector<std::string> args;
  bool past_terminator = false;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (i > 0 && !past_terminator && a.size() > 2 && a[0] == '-' && a[1] != '-' &&
        !(a[1] >= '0' && a[1] <= '9')) {
      a.insert(0, "-");
    }
    if (a == "--") past_terminator = true;
    args.push_back(std::move(a));
  }
  return args;
}

// One command-line flag: its name, how its value is read and stored, its --help line.
struct FlagRow {
  const char* name;
  FlagValue value;
  const char* help;
};

// "--max-connections" → "INFERENCECACHE_MAX_CONNECTIONS".
std::string env_name(std::string_view flag) {
  std::string out(kEnvPrefix);
  for (char ch : flag.substr(2)) {
    out += ch == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  }
  return out;
}

// --help's text after a flag's name: "TYPE=DEFAULT (Env:VARIABLE)" for every flag, an empty
// default shown as "" and a switch's as on or off (CLI11 itself leaves both out).
std::string option_text(std::string_view type, const std::string& default_text,
                        const std::string& env) {
  return std::string(type) + "=" + (default_text.empty() ? "\"\"" : default_text) + " (Env:" + env +
         ")";
}

void add_flag_row(CLI::App& app, const FlagRow& row) {
  const FlagValue& v = row.value;
  CLI::Option* option = nullptr;
  if (v.shape == FlagValue::Shape::kSwitch) {
    option = app.add_flag(row.name, *v.switch_out, row.help);
  } else if (v.shape == FlagValue::Shape::kList) {
    option = app.add_option(row.name, *v.list_out, row.help)->delimiter(',');
  } else {
    option =
        app.add_option_function<std::string>(row.name, v.set, row.help)
            ->check(CLI::Validator([check = v.check](std::string& t) { return check(t); }, ""));
  }
  const std::string env = env_name(row.name);
  option->type_name(v.type)->envname(env)->option_text(option_text(v.type, v.default_text, env));
}

// Every flag, in --help order (the order of definition). A flag is one row: its name, its
// typed value (text, on_off, list, boolean, uint_in, number_in, duration_at_least, one_of)
// pointing at its ServerConfig field, whose initial value is the default, and its help.
std::vector<FlagRow> flag_rows(ServerConfig& c) {
  // One flag per line, however long its help.
  // clang-format off
  return {
      {"--grpc-bind-address", text(&c.grpc_bind_address), "gRPC listener [host]:port"},
      {"--http-bind-address", text(&c.http_bind_address), "public HTTP listener (/healthz, /readyz, /metrics)"},
      {"--snapshot-bind-address", text(&c.snapshot_bind_address), "control HTTP listener (/snapshot, /policy)"},
      {"--tls-cert-file", text(&c.tls_cert_file), "PEM certificate for gRPC TLS (with key)"},
      {"--tls-key-file", text(&c.tls_key_file), "PEM private key for gRPC TLS (with cert)"},
      {"--engine-block-size", uint_in<std::uint32_t>(&c.engine_block_size, 1, 1u << 16), "tokens per KV block"},
      {"--tokenizer-models-dir", text(&c.tokenizer_models_dir), "tokenizer models for prompt_text (empty: prompt_text fails open)"},
      {"--log-format", one_of(&c.log_format, {{"json", LogFormat::json}, {"text", LogFormat::text}}, "want json or text"), "log line format"},
      {"--log-level", one_of(&c.log_level, {{"debug", LogLevel::debug}, {"info", LogLevel::info}, {"warn", LogLevel::warn}, {"error", LogLevel::error}}, "want debug, info, warn or error"), "lowest level logged"},
      {"--insecure-disable-auth", on_off(&c.insecure_disable_auth), "serve /snapshot and /policy without a bearer token"},
      {"--threads", uint_in<unsigned>(&c.threads, 0, 1024), "reactor threads (0: one per CPU)"},
      {"--pin-threads", boolean(&c.pin_threads), "pin each reactor thread to a CPU"},
      {"--reactor-backend", one_of(&c.reactor_backend, {{"auto", ReactorBackend::kAuto}, {"io_uring", ReactorBackend::kIoUring}, {"epoll", ReactorBackend::kEpoll}}, "want auto, io_uring or epoll"), "reactor backend (auto: io_uring, else epoll)"},
      {"--max-message-bytes", uint_in<std::uint32_t>(&c.max_message_bytes, 5, 1u << 30), "largest gRPC message, bytes"},
      {"--max-concurrent-streams", uint_in<std::uint32_t>(&c.max_concurrent_streams, 1, 1u << 20), "HTTP/2 concurrent streams per connection"},
      {"--stream-reset-burst", uint_in<std::uint32_t>(&c.stream_reset_burst, 1, 1u << 20), "client RST_STREAMs a connection may send at once (rapid reset)"},
      {"--stream-reset-rate", uint_in<std::uint32_t>(&c.stream_reset_rate, 1, 1u << 20), "client RST_STREAMs per second a connection may sustain"},
      {"--max-connections", uint_in<std::uint32_t>(&c.max_connections, 1, 1'000'000), "open connections per listener"},
      {"--idle-timeout", duration_at_least(&c.idle_timeout_us, 0), "close a connection idle this long (0: never)"},
      {"--max-connection-age", duration_at_least(&c.max_connection_age_us, 0), "GOAWAY a gRPC connection this old, +-10% jitter, so clients reconnect and rebalance (0: never)"},
      {"--max-connection-age-grace", duration_at_least(&c.max_connection_age_grace_us, 0), "time in-flight calls get after that GOAWAY before the connection closes"},
      {"--shutdown-grace", duration_at_least(&c.shutdown_grace_us, 0), "time in-flight calls get after SIGTERM/SIGINT"},
      {"--index-ttl", duration_at_least(&c.index_ttl_us, 1000), "index entry time-to-live"},
      {"--index-max-entries", uint_in<std::uint64_t>(&c.index_max_entries, 1, std::uint64_t{1} << 40), "global cap on (key, replica) entries"},
      {"--sweep-interval", duration_at_least(&c.sweep_interval_us, 1000), "period of the TTL sweep"},
      {"--ranking", one_of(&c.ranking, {{"work-aware", Ranking::kWorkAware}, {"load-aware", Ranking::kLoadAware}, {"reference", Ranking::kReference}}, "want work-aware, load-aware or reference"), "ranking of tenants without a policy choice"},
      {"--prefill-rate", number_in(&c.work_aware.prefill_tokens_per_s, 1, 1e9), "work-aware: prefill tokens/s of a replica until the scope has learned a rate"},
      {"--uncached-weight", number_in(&c.work_aware.uncached_weight, 0.1, 1), "work-aware: weight of the request's own uncached prefill against queued work in the pick"},
      {"--load-cost-tokens", number_in(&c.load_aware.load_cost_tokens, 0, 1e9), "load-aware: prefill tokens one recent hint costs"},
      {"--load-window", number_in(&c.load_aware.load_window, 1, 1e6), "load-aware: hints the load remembers"},
      {"--pressure-load", number_in(&c.load_aware.pressure_load, 0, 1e6), "load-aware: hints a replica at pressure 1.0 counts as"},
      {"--saturation-pressure", number_in(&c.load_aware.saturation_pressure, 0, 1e6), "load-aware: pressure at which a replica is saturated"},
      {"--metrics-stream-interval", duration_at_least(&c.metrics_stream_interval_us, 100'000), "period of StreamMetrics samples (docs/streams.md)"},
      {"--events-stream-max-subscribers", uint_in<std::uint32_t>(&c.events_stream_max_subscribers, 1, 1u << 16), "open StreamCacheEvents calls per server (docs/streams.md)"},
      {"--metrics-stream-max-subscribers", uint_in<std::uint32_t>(&c.metrics_stream_max_subscribers, 1, 1u << 16), "open StreamMetrics calls per server (docs/streams.md)"},
      {"--prompt-text-max-cpu", duration_at_least(&c.prompt_text_max_cpu_us, 1000), "prompt_text: tokenizing work one call may take; past it the call fails open (docs/prompt-text.md)"},
      {"--prompt-text-max-jobs", uint_in<std::uint32_t>(&c.prompt_text_max_jobs, 1, 1u << 16), "prompt_text: calls being tokenized per core; one more fails open"},
      {"--prompt-text-max-jobs-per-tenant", uint_in<std::uint32_t>(&c.prompt_text_max_jobs_per_tenant, 1, 1u << 16), "prompt_text: calls being tokenized per tenant per core; one more fails open"},
      {"--policy-file", text(&c.policy_file), "CachePolicy JSON loaded at start"},
      {"--templates-file", text(&c.templates_file),
       "prompt-template JSON loaded at start, re-read when it changes and on SIGHUP"},
      {"--control-token-file", text(&c.control_token_file), "bearer token for the control listener"},
      {"--state-file", text(&c.state_file), "warm restart: index state loaded at start, saved periodically and at exit"},
      {"--state-save-interval", duration_at_least(&c.state_save_interval_us, 100'000), "period of --state-file saves"},
      {"--nats-url", text(&c.nats_url), "replication: NATS server URL(s), comma-separated (docs/replication.md)"},
      {"--nats-stream", text(&c.nats_stream), "replication: the JetStream stream name"},
      {"--nats-tls-ca-file", text(&c.nats_tls_ca_file), "replication: TLS to NATS, trusting this PEM CA bundle"},
      {"--nats-tls-cert-file", text(&c.nats_tls_cert_file), "replication: TLS client certificate (PEM) for NATS"},
      {"--nats-tls-key-file", text(&c.nats_tls_key_file), "replication: its private key (PEM)"},
      {"--nats-creds-file", text(&c.nats_creds_file), "replication: NATS credentials file (.creds: user JWT and NKey seed)"},
      {"--nats-buffer-bytes", uint_in<std::uint64_t>(&c.nats_buffer_bytes, 1u << 16, std::uint64_t{1} << 36), "replication: changes buffered while NATS is slow or away, bytes"},
      {"--nats-startup-wait", duration_at_least(&c.nats_startup_wait_us, 0), "replication: /readyz waits this long for NATS at start, then serves local state"},
      {"--nats-snapshot-interval", duration_at_least(&c.nats_snapshot_interval_us, 0), "replication: period of index snapshots published to JetStream (0: never)"},
      {"--nats-snapshot-max-bytes", uint_in<std::uint64_t>(&c.nats_snapshot_max_bytes, 1u << 16, std::uint64_t{1} << 34), "replication: larger snapshots are not published, bytes"},
      {"--spread-tenants", list(&c.spread_tenants), "tenants answered by read copies on several cores, comma-separated (docs/placement.md)"},
      {"--spread-cores", uint_in<unsigned>(&c.spread_cores, 0, 1024), "cores holding each --spread-tenants tenant, its owner included (0: all)"},
      {"--gateway", on_off(&c.gateway), "serve the endpoint picker (Envoy ext_proc) on the gRPC port (docs/gateway.md)"},
      {"--gateway-listen", text(&c.gateway_listen), "endpoint picker: serve it on its own listener [host]:port instead of the gRPC port (empty: the gRPC port)"},
      {"--gateway-shed-queue", duration_at_least(&c.gateway_shed_queue_us, 0), "endpoint picker: answer 429 when every eligible endpoint has more prefill work queued than this (0: never shed)"},
      {"--gateway-tenant-header", text(&c.gateway_tenant_header), "endpoint picker: request header naming the tenant (lower case)"},
      {"--gateway-default-tenant", text(&c.gateway_default_tenant), "endpoint picker: tenant of requests without that header"},
      {"--gateway-hash-scheme", text(&c.gateway_hash_scheme), "endpoint picker: hash scheme of the engines' reports (the kvevents adapter's --hash-scheme)"},
      {"--gateway-body-mode", one_of(&c.gateway_body_mode, {{"full-duplex", GatewayBodyMode::kFullDuplex}, {"buffered", GatewayBodyMode::kBuffered}, {"streamed", GatewayBodyMode::kStreamed}}, "want full-duplex, buffered or streamed"), "endpoint picker: the ext_proc filter's request body mode when Envoy does not send it"},
      {"--gateway-max-body-bytes", uint_in<std::uint32_t>(&c.gateway_max_body_bytes, 1024, 1u << 30), "endpoint picker: request body held per stream; longer bodies are picked by load"},
      {"--gateway-tokenize-budget", duration_at_least(&c.gateway_tokenize_budget_us, 100), "endpoint picker: how long a pick waits for its tokens from the body's end, slices and waiting included; past it the pick goes by load"},
      {"--gateway-max-endpoints", uint_in<std::uint32_t>(&c.gateway_max_endpoints, 1, 64), "endpoint picker: endpoints per answer (the pick and its fallbacks)"},
  };
  // clang-format on
}

// The flags' environment variables become "--flag=value" arguments when the command line does
// not give the flag, so they beat the config file (read by CLI11 only for flags not given).
// Returns the (flag, variable) pairs it added, so an error in one of those
// values names the variable the operator set (named_source).
std::vector<std::pair<std::string, std::string>> add_environment(const CLI::App& app,
                                                                 std::vector<std::string>& args) {
  std::vector<std::pair<std::string, std::string>> added;
  for (const CLI::Option* option : app.get_options()) {
    const std::string& env = option->get_envname();
    const char* value = env.empty() ? nullptr : std::getenv(env.c_str());
    if (value == nullptr || *value == '\0') continue;
    const std::string flag = option->get_name();
    const bool given = std::any_of(args.begin() + 1, args.end(), [&](const std::string& a) {
      return a == flag || a.rfind(flag + "=", 0) == 0;
    });
    if (!given) {
      args.push_back(flag + "=" + value);
      added.emplace_back(flag, env);
    }
  }
  return added;
}

// An error line about a flag whose value came from its environment variable
// says so: "--threads (from INFERENCECACHE_THREADS): want …". The operator
// set the variable and never typed the flag.
std::string named_source(std::string why,
                         const std::vector<std::pair<std::string, std::string>>& from_env) {
  for (const auto& [flag, env] : from_env) {
    if (why.size() > flag.size() && why.compare(0, flag.size(), flag) == 0 &&
        (why[flag.size()] == ':' || why[flag.size()] == ' ')) {
      return why.insert(flag.size(), " (from " + env + ")");
    }
  }
  return why;
}

// A JetStream stream name: letters, digits, '-' and '_' (no '.', '*', '>',
// spaces or path separators), at most 64 bytes.
void require_stream_name(const std::string& name) {
  const bool ok =
      !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_';
      });
  if (!ok) {
    throw FlagError{"--nats-stream: invalid stream name \"" + name +
                    "\" (letters, digits, '-' and '_', at most 64)"};
  }
}

// One URL of --nats-url as libnats takes it (natsOptions_SetServers):
// [nats://|tls://][user[:password]@]host[:port], host a name, an IPv4 address or
// [IPv6]. Checked here so a typo exits 2 at start instead of leaving the server
// retrying a host that cannot exist.
bool nats_url_ok(std::string_view url) {
  while (!url.empty() && url.front() == ' ') url.remove_prefix(1);
  while (!url.empty() && url.back() == ' ') url.remove_suffix(1);
  if (const std::size_t scheme = url.find("://"); scheme != std::string_view::npos) {
    std::string name(url.substr(0, scheme));
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (name != "nats" && name != "tls") return false;
    url.remove_prefix(scheme + 3);
  }
  if (const std::size_t at = url.rfind('@'); at != std::string_view::npos)
    url.remove_prefix(at + 1);
  std::string_view host = url, port;
  if (!url.empty() && url.front() == '[') {
    const std::size_t close = url.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    host = url.substr(0, close + 1);
    url.remove_prefix(close + 1);
    if (!url.empty() && url.front() != ':') return false;
    if (!url.empty()) port = url.substr(1);
  } else if (const std::size_t colon = url.find(':'); colon != std::string_view::npos) {
    host = url.substr(0, colon);
    port = url.substr(colon + 1);
    if (port.empty()) return false;
  }
  const auto bad_host_char = [](char ch) {
    return std::isspace(static_cast<unsigned char>(ch)) || ch == '/' || ch == '?' || ch == '#';
  };
  if (host.empty() || std::any_of(host.begin(), host.end(), bad_host_char)) return false;
  if (url.find(':') != std::string_view::npos && port.empty()) return false;
  if (!port.empty()) {
    if (port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char ch) {
          return std::isdigit(static_cast<unsigned char>(ch));
        }))
      return false;
    const int n = std::stoi(std::string(port));
    if (n < 1 || n > 65535) return false;
  }
  return true;
}

void require_nats_urls(const std::string& urls) {
  if (urls.empty()) return;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = urls.find(',', start);
    const std::string_view one = std::string_view(urls).substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!nats_url_ok(one)) {
      throw FlagError{"--nats-url: " + quote_value(std::string(one)) +
                      " is not a NATS server URL (want [nats://|tls://][user:password@]host[:port],"
                      " comma-separated)"};
    }
    if (comma == std::string::npos) return;
    start = comma + 1;
  }
}

// --state-file may not exist yet (first start), but its directory must.
void require_state_dir(const std::string& path) {
  if (path.empty()) return;
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw FlagError{"--state-file: directory \"" + dir + "\" does not exist"};
  }
}

// --nats-tls-*, --nats-creds-file: readable files; a certificate and its key come together.
void require_nats_tls(const ServerConfig& c) {
  if (c.nats_tls_cert_file.empty() != c.nats_tls_key_file.empty()) {
    throw FlagError{
        c.nats_tls_cert_file.empty()
            ? "--nats-tls-key-file given without --nats-tls-cert-file (both or neither)"
            : "--nats-tls-cert-file given without --nats-tls-key-file (both or neither)"};
  }
  require_readable("--nats-tls-ca-file", c.nats_tls_ca_file);
  require_readable("--nats-tls-cert-file", c.nats_tls_cert_file);
  require_readable("--nats-tls-key-file", c.nats_tls_key_file);
  require_readable("--nats-creds-file", c.nats_creds_file);
}

// What one flag's value check cannot see: files, directories and combinations.
void validate(const ServerConfig& c) {
  if (c.tls_cert_file.empty() != c.tls_key_file.empty()) {
    throw FlagError{c.tls_cert_file.empty()
                        ? "--tls-key-file given without --tls-cert-file (both or neither)"
                        : "--tls-cert-file given without --tls-key-file (both or neither)"};
  }
  if (c.insecure_disable_auth && !c.control_token_file.empty()) {
    // Either one silently winning would surprise someone: a token file that
    // is ignored, or an "insecure" flag that is not.
    throw FlagError{
        "--insecure-disable-auth and --control-token-file contradict each other (give one)"};
  }
  require_readable("--tls-cert-file", c.tls_cert_file);
  require_readable("--tls-key-file", c.tls_key_file);
  require_readable("--policy-file", c.policy_file);
  require_readable("--templates-file", c.templates_file);
  require_readable("--control-token-file", c.control_token_file);
  require_state_dir(c.state_file);
  require_stream_name(c.nats_stream);
  require_nats_urls(c.nats_url);
  require_nats_tls(c);
  for (const std::string& tenant : c.spread_tenants) {
    if (tenant.empty()) throw FlagError{"--spread-tenants: empty tenant name"};
  }
}

// CLI11's complaints about the --config file, said like the other flags' ("--config: ..."):
// "F was not readable (missing?)" and "INI was not able to parse NAME" (an unknown name).
std::string config_file_error(const std::string& what) {
  constexpr std::string_view kMissing = " was not readable (missing?)";
  constexpr std::string_view kExtra = "INI was not able to parse ";
  if (what.size() > kMissing.size() &&
      what.compare(what.size() - kMissing.size(), kMissing.size(), kMissing) == 0) {
    const std::string path = what.substr(0, what.size() - kMissing.size());
    const int error = ::access(path.c_str(), R_OK) == 0 ? 0 : errno;
    return "--config: cannot read " + quote_value(path) +
           (error != 0 ? ": " + std::string(std::strerror(error)) : std::string());
  }
  if (what.rfind(kExtra, 0) == 0) {
    return "--config: unknown flag " + quote_value(what.substr(kExtra.size())) +
           " in the file (names are the flags' without the dashes)";
  }
  return "--config: " + what;
}

// The --log-format a refused command line asked for, so that its error line is in that format:
// read again by an app that knows only --log-format and --config and ignores everything else.
// json when the value is missing or bad (or the --config file does not parse).
LogFormat chosen_log_format(const std::vector<std::string>& args) {
  CLI::App app;
  std::string format;
  app.add_option("--log-format", format)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_config("--config");
  app.allow_extras();
  app.allow_config_extras(CLI::config_extras_mode::ignore);
  std::vector<const char*> ptrs;
  for (const auto& a : args) ptrs.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(ptrs.size()), ptrs.data());
  } catch (const CLI::Error&) {
    // What it read before the error still counts; json otherwise.
  }
  return format == "text" ? LogFormat::text : LogFormat::json;
}

FlagsOutcome error_outcome(const std::string& why, const std::vector<std::string>& args) {
  return FlagsOutcome{std::nullopt, 2, one_line(why), chosen_log_format(args)};
}

}  // namespace

LogFormat parse_log_format(const std::string& text) {
  if (text == "json") return LogFormat::json;
  if (text == "text") return LogFormat::text;
  throw FlagError{"--log-format: want json or text, got " + quote_value(text)};
}

LogLevel parse_log_level(const std::string& text) {
  if (text == "debug") return LogLevel::debug;
  if (text == "info") return LogLevel::info;
  if (text == "warn") return LogLevel::warn;
  if (text == "error") return LogLevel::error;
  throw FlagError{"--log-level: want debug, info, warn or error, got " + quote_value(text)};
}

std::string one_line(std::string s) {
  for (char& ch : s) {
    if (ch == '\n' || ch == '\r') ch = ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::optional<std::int64_t> parse_duration_us(std::string_view text) {
  if (text == "0") return 0;
  if (text.empty()) return std::nullopt;
  // Accumulate in nanoseconds as long double to accept fractions ("1.5s").
  long double total_ns = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t start = i;
    while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
    const std::string_view number = text.substr(start, i - start);
    if (number.empty() || number == "." || number.find('.') != number.rfind('.')) {
      return std::nullopt;
    }
    long double value = 0;
    long double scale = 1;
    bool fraction = false;
    for (char ch : number) {
      if (ch == '.') {
        fraction = true;
        continue;
      }
      value = value * 10 + (ch - '0');
      if (fraction) scale *= 10;
    }
    value /= scale;
    const std::size_t unit_start = i;
    while (i < text.size() && !((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
    const std::string_view unit = text.substr(unit_start, i - unit_start);
    long double ns_per_unit;
    if (unit == "ns") {
      ns_per_unit = 1;
    } else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") {
      ns_per_unit = 1e3L;
    } else if (unit == "ms") {
      ns_per_unit = 1e6L;
    } else if (unit == "s") {
      ns_per_unit = 1e9L;
    } else if (unit == "m") {
      ns_per_unit = 60e9L;
    } else if (unit == "h") {
      ns_per_unit = 3600e9L;
    } else {
      return std::nullopt;
    }
    total_ns += value * ns_per_unit;
  }
  const long double us = total_ns / 1000;
  if (us > static_cast<long double>(std::numeric_limits<std::int64_t>::max() / 2)) {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(us);
}

FlagsOutcome parse_flags(int argc, const char* const* argv) {
  ServerConfig config;
  CLI::App app{
      "InferenceCache: tells LLM gateways which engine replica holds the KV cache "
      "for a prompt prefix.\nEvery flag may also come from its environment variable "
      "(INFERENCECACHE_<FLAG>, e.g. INFERENCECACHE_MAX_CONNECTIONS) or from the --config file; "
      "the command line wins over the environment, the environment over the file.\nEach flag "
      "shows TYPE=DEFAULT; a SWITCH is on when given (--name=false turns it off).",
      std::string(kProgram)};
  for (FlagRow& row : flag_rows(config)) add_flag_row(app, row);
  app.set_config("--config", "",
                 "read flags from this TOML file, one `name = value` per line (names without "
                 "the dashes)")
      ->type_name("FILE")
      ->envname(env_name("--config"))
      ->option_text(option_text("FILE", "", env_name("--config")));
  app.allow_config_extras(CLI::config_extras_mode::error);
  app.set_version_flag("--version", "", "print version, commit, compiler and library versions");
  std::vector<std::string> args = normalize_args(argc, argv);
  const auto from_env = add_environment(app, args);
  std::vector<const char*> ptrs;
  ptrs.reserve(args.size());
  for (const auto& a : args) ptrs.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(ptrs.size()), ptrs.data());
  } catch (const CLI::CallForHelp&) {
    return FlagsOutcome{std::nullopt, 0, app.help()};
  } catch (const CLI::CallForVersion&) {
    return FlagsOutcome{std::nullopt, 0, buildinfo::version_text(kProgram)};
  } catch (const CLI::ExtrasError& e) {
    return error_outcome(std::string("unknown flag or argument: ") +
                             one_line(CLI::detail::join(app.remaining(), " ")),
                         args);
  } catch (const CLI::FileError& e) {
    return error_outcome(config_file_error(e.what()), args);
  } catch (const CLI::ConfigError& e) {
    return error_outcome(config_file_error(e.what()), args);
  } catch (const CLI::ParseError& e) {
    return error_outcome(named_source(e.what(), from_env), args);
  }
  try {
    validate(config);
  } catch (const FlagError& e) {
    return error_outcome(named_source(e.why, from_env), args);
  }
  return FlagsOutcome{std::move(config), 0, {}};
}

}  // namespace ic::config
