#include "config/flags.hh"

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <limits>
#include <variant>
#include <vector>

#include "buildinfo/build_info.hh"

namespace ic::config {

namespace {

constexpr std::string_view kProgram = "inferencecache-server";

std::string quote_value(std::string_view s) { return "\"" + std::string(s) + "\""; }

template <typename T>
T parse_uint(std::string_view flag, const std::string& text, T min, T max) {
  std::uint64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc{} || ptr != end || v < min || v > max) {
    throw FlagError{std::string(flag) + ": want an integer in [" + std::to_string(min) + ", " +
                    std::to_string(max) + "], got " + quote_value(text)};
  }
  return static_cast<T>(v);
}

double parse_number(std::string_view flag, const std::string& text, double min, double max) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc{} || ptr != end || !(v >= min) || !(v <= max)) {
    char range[64];
    std::snprintf(range, sizeof range, "[%g, %g]", min, max);
    throw FlagError{std::string(flag) + ": want a number in " + range + ", got " +
                    quote_value(text)};
  }
  return v;
}

Ranking parse_ranking(const std::string& text) {
  if (text == "work-aware") return Ranking::kWorkAware;
  if (text == "load-aware") return Ranking::kLoadAware;
  if (text == "reference") return Ranking::kReference;
  throw FlagError{"--ranking: want work-aware, load-aware or reference, got " + quote_value(text)};
}

std::int64_t parse_duration_flag(std::string_view flag, const std::string& text,
                                 std::int64_t min_us) {
  const auto v = parse_duration_us(text);
  if (!v) {
    throw FlagError{std::string(flag) + ": invalid duration " + quote_value(text) +
                    " (want e.g. 500ms, 10s, 30m, 1h30m)"};
  }
  if (*v < min_us) {
    throw FlagError{std::string(flag) + ": must be at least " + std::to_string(min_us / 1000) +
                    "ms, got " + quote_value(text)};
  }
  return *v;
}

bool parse_bool(std::string_view flag, const std::string& text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  throw FlagError{std::string(flag) + ": want true or false, got " + quote_value(text)};
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

// The raw string form of every flag; converted and checked after CLI11 parsed.
struct RawFlags {
  std::string engine_block_size = "16";
  std::string log_format = "json";
  std::string log_level = "info";
  std::string threads = "0";
  std::string pin_threads = "true";
  std::string max_message_bytes = "4194304";
  std::string max_concurrent_streams = "1024";
  std::string stream_reset_burst = "200";
  std::string stream_reset_rate = "33";
  std::string max_connections = "10000";
  std::string idle_timeout = "5m";
  std::string shutdown_grace = "10s";
  std::string index_ttl = "30m";
  std::string index_max_entries = "1000000";
  std::string sweep_interval = "1m";
  std::string ranking = "work-aware";
  std::string prefill_rate = "10000";
  std::string load_cost_tokens = "512";
  std::string load_window = "64";
  std::string pressure_load = "16";
  std::string saturation_pressure = "1";
  std::string state_save_interval = "1m";
  std::string spread_cores = "0";
  std::string nats_buffer_bytes = "67108864";
  std::string nats_startup_wait = "30s";
  std::string nats_snapshot_interval = "5m";
  std::string nats_snapshot_max_bytes = "268435456";
  std::string metrics_stream_interval = "10s";
};

// One command-line flag: its name, where CLI11 stores what it is given, its
// --help line. A string takes one value (a ServerConfig string, or a RawFlags
// one converted and checked after parsing); a bool is a flag without value;
// a vector takes a comma-separated list.
struct FlagRow {
  const char* name;
  std::variant<std::string*, bool*, std::vector<std::string>*> value;
  const char* help;
};

void add_flag_row(CLI::App& app, const FlagRow& row) {
  if (auto* text = std::get_if<std::string*>(&row.value)) {
    app.add_option(row.name, **text, row.help);
  } else if (auto* flag = std::get_if<bool*>(&row.value)) {
    app.add_flag(row.name, **flag, row.help);
  } else {
    app.add_option(row.name, *std::get<std::vector<std::string>*>(row.value), row.help)
        ->delimiter(',');
  }
}

// Every flag, in --help order (the order of definition).
void define_flags(CLI::App& app, ServerConfig& c, RawFlags& raw) {
  // One flag per line, however long its help.
  // clang-format off
  const FlagRow rows[] = {
      {"--grpc-bind-address", &c.grpc_bind_address, "gRPC listener [host]:port"},
      {"--http-bind-address", &c.http_bind_address, "public HTTP listener (/healthz, /readyz, /metrics)"},
      {"--snapshot-bind-address", &c.snapshot_bind_address, "control HTTP listener (/snapshot, /policy)"},
      {"--tls-cert-file", &c.tls_cert_file, "PEM certificate for gRPC TLS (with key)"},
      {"--tls-key-file", &c.tls_key_file, "PEM private key for gRPC TLS (with cert)"},
      {"--engine-block-size", &raw.engine_block_size, "tokens per KV block"},
      {"--tokenizer-models-dir", &c.tokenizer_models_dir, "tokenizer models for prompt_text (empty: prompt_text fails open)"},
      {"--log-format", &raw.log_format, "json|text"},
      {"--log-level", &raw.log_level, "debug|info|warn|error"},
      {"--insecure-disable-auth", &c.insecure_disable_auth, "serve /snapshot and /policy without a bearer token"},
      {"--threads", &raw.threads, "reactor threads (0: one per CPU)"},
      {"--pin-threads", &raw.pin_threads, "pin each reactor thread to a CPU (true|false)"},
      {"--max-message-bytes", &raw.max_message_bytes, "largest gRPC message, bytes"},
      {"--max-concurrent-streams", &raw.max_concurrent_streams, "HTTP/2 concurrent streams per connection"},
      {"--stream-reset-burst", &raw.stream_reset_burst, "client RST_STREAMs a connection may send at once (rapid reset)"},
      {"--stream-reset-rate", &raw.stream_reset_rate, "client RST_STREAMs per second a connection may sustain"},
      {"--max-connections", &raw.max_connections, "open connections per listener"},
      {"--idle-timeout", &raw.idle_timeout, "close a connection idle this long (0: never)"},
      {"--shutdown-grace", &raw.shutdown_grace, "time in-flight calls get after SIGTERM/SIGINT"},
      {"--index-ttl", &raw.index_ttl, "index entry time-to-live"},
      {"--index-max-entries", &raw.index_max_entries, "global cap on (key, replica) entries"},
      {"--sweep-interval", &raw.sweep_interval, "period of the TTL sweep"},
      {"--ranking", &raw.ranking, "work-aware|load-aware|reference (tenants without a policy choice)"},
      {"--prefill-rate", &raw.prefill_rate, "work-aware: prefill tokens/s of a replica until its rate is learned"},
      {"--load-cost-tokens", &raw.load_cost_tokens, "load-aware: prefill tokens one recent hint costs"},
      {"--load-window", &raw.load_window, "load-aware: hints the load remembers"},
      {"--pressure-load", &raw.pressure_load, "load-aware: hints a replica at pressure 1.0 counts as"},
      {"--saturation-pressure", &raw.saturation_pressure, "load-aware: pressure at which a replica is saturated"},
      {"--metrics-stream-interval", &raw.metrics_stream_interval, "period of StreamMetrics samples (docs/streams.md)"},
      {"--policy-file", &c.policy_file, "CachePolicy JSON loaded at start"},
      {"--control-token-file", &c.control_token_file, "bearer token for the control listener"},
      {"--state-file", &c.state_file, "warm restart: index state loaded at start, saved periodically and at exit"},
      {"--state-save-interval", &raw.state_save_interval, "period of --state-file saves"},
      {"--nats-url", &c.nats_url, "replication: NATS server URL(s), comma-separated (docs/replication.md)"},
      {"--nats-stream", &c.nats_stream, "replication: the JetStream stream name"},
      {"--nats-buffer-bytes", &raw.nats_buffer_bytes, "replication: changes buffered while NATS is slow or away"},
      {"--nats-startup-wait", &raw.nats_startup_wait, "replication: /readyz waits this long for NATS at start, then serves local state"},
      {"--nats-snapshot-interval", &raw.nats_snapshot_interval, "replication: period of index snapshots published to JetStream (0: never)"},
      {"--nats-snapshot-max-bytes", &raw.nats_snapshot_max_bytes, "replication: larger snapshots are not published"},
      {"--spread-tenants", &c.spread_tenants, "tenants answered by read copies on several cores, comma-separated (docs/placement.md)"},
      {"--spread-cores", &raw.spread_cores, "cores holding each --spread-tenants tenant, its owner included (0: all)"},
  };
  // clang-format on
  for (const FlagRow& row : rows) add_flag_row(app, row);
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

void convert_and_validate(ServerConfig& c, const RawFlags& raw) {
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
  require_readable("--control-token-file", c.control_token_file);
  c.engine_block_size =
      parse_uint<std::uint32_t>("--engine-block-size", raw.engine_block_size, 1, 1u << 16);
  c.log_format = parse_log_format(raw.log_format);
  c.log_level = parse_log_level(raw.log_level);
  c.threads = parse_uint<unsigned>("--threads", raw.threads, 0, 1024);
  c.pin_threads = parse_bool("--pin-threads", raw.pin_threads);
  c.max_message_bytes =
      parse_uint<std::uint32_t>("--max-message-bytes", raw.max_message_bytes, 5, 1u << 30);
  c.max_concurrent_streams = parse_uint<std::uint32_t>("--max-concurrent-streams",
                                                       raw.max_concurrent_streams, 1, 1u << 20);
  c.stream_reset_burst =
      parse_uint<std::uint32_t>("--stream-reset-burst", raw.stream_reset_burst, 1, 1u << 20);
  c.stream_reset_rate =
      parse_uint<std::uint32_t>("--stream-reset-rate", raw.stream_reset_rate, 1, 1u << 20);
  c.max_connections =
      parse_uint<std::uint32_t>("--max-connections", raw.max_connections, 1, 1'000'000);
  c.idle_timeout_us = parse_duration_flag("--idle-timeout", raw.idle_timeout, 0);
  c.shutdown_grace_us = parse_duration_flag("--shutdown-grace", raw.shutdown_grace, 0);
  c.index_ttl_us = parse_duration_flag("--index-ttl", raw.index_ttl, 1000);
  c.index_max_entries = parse_uint<std::uint64_t>("--index-max-entries", raw.index_max_entries, 1,
                                                  std::uint64_t{1} << 40);
  c.sweep_interval_us = parse_duration_flag("--sweep-interval", raw.sweep_interval, 1000);
  c.ranking = parse_ranking(raw.ranking);
  c.work_aware.prefill_tokens_per_s = parse_number("--prefill-rate", raw.prefill_rate, 1, 1e9);
  c.load_aware.load_cost_tokens = parse_number("--load-cost-tokens", raw.load_cost_tokens, 0, 1e9);
  c.load_aware.load_window = parse_number("--load-window", raw.load_window, 1, 1e6);
  c.load_aware.pressure_load = parse_number("--pressure-load", raw.pressure_load, 0, 1e6);
  c.load_aware.saturation_pressure =
      parse_number("--saturation-pressure", raw.saturation_pressure, 0, 1e6);
  require_state_dir(c.state_file);
  c.state_save_interval_us =
      parse_duration_flag("--state-save-interval", raw.state_save_interval, 100'000);
  c.metrics_stream_interval_us =
      parse_duration_flag("--metrics-stream-interval", raw.metrics_stream_interval, 100'000);
  require_stream_name(c.nats_stream);
  c.nats_buffer_bytes = parse_uint<std::uint64_t>("--nats-buffer-bytes", raw.nats_buffer_bytes,
                                                  1u << 16, std::uint64_t{1} << 36);
  c.nats_startup_wait_us = parse_duration_flag("--nats-startup-wait", raw.nats_startup_wait, 0);
  c.nats_snapshot_interval_us =
      parse_duration_flag("--nats-snapshot-interval", raw.nats_snapshot_interval, 0);
  c.nats_snapshot_max_bytes = parse_uint<std::uint64_t>(
      "--nats-snapshot-max-bytes", raw.nats_snapshot_max_bytes, 1u << 16, std::uint64_t{1} << 34);
  c.spread_cores = parse_uint<unsigned>("--spread-cores", raw.spread_cores, 0, 1024);
  for (const std::string& tenant : c.spread_tenants) {
    if (tenant.empty()) throw FlagError{"--spread-tenants: empty tenant name"};
  }
}

FlagsOutcome error_outcome(const std::string& why) {
  return FlagsOutcome{std::nullopt, 2, std::string(kProgram) + ": " + one_line(why)};
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
  RawFlags raw;
  CLI::App app{
      "InferenceCache: tells LLM gateways which engine replica holds the KV cache "
      "for a prompt prefix.",
      std::string(kProgram)};
  app.option_defaults()->always_capture_default();  // --help shows each default
  define_flags(app, config, raw);
  app.set_version_flag("--version", "", "print version, commit, compiler and library versions");
  const std::vector<std::string> args = normalize_args(argc, argv);
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
                         one_line(CLI::detail::join(app.remaining(), " ")));
  } catch (const CLI::ParseError& e) {
    return error_outcome(e.what());
  }
  try {
    convert_and_validate(config, raw);
  } catch (const FlagError& e) {
    return error_outcome(e.why);
  }
  return FlagsOutcome{std::move(config), 0, {}};
}

}  // namespace ic::config
