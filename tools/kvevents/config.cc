#include "kvevents/config.hh"

#include <CLI/CLI.hpp>
#include <charconv>

#include "common/cli_parse.hh"
#include "config/flags.hh"

namespace ic::tools::kvevents {
namespace {

constexpr const char* kProgram = "inferencecache-kvevents";

using config::FlagError;

// A duration flag's text (its default until given) and its least value, µs.
struct DurationText {
  std::string text;
  std::int64_t min_us;
};

// Flags whose text needs converting after CLI11 parsed.
struct RawFlags {
  DurationText window{"100ms", 1000};
  DurationText stats_interval{"10s", 100'000};
  DurationText replay_timeout{"2s", 10'000};
  DurationText refresh_interval{"10m", 1'000'000};  // "0": never
  std::string cache_tier = "auto";
  std::string lora_adapter_names;
  std::string log_format = "json";
  std::string log_level = "info";
};

std::int64_t duration_flag(const char* flag, const DurationText& d) {
  const auto v = config::parse_duration_us(d.text);
  if (!v || *v < d.min_us) {
    throw FlagError{std::string(flag) + ": want a duration like 100ms or 10s, at least " +
                    std::to_string(d.min_us / 1000) + "ms, got \"" + d.text + "\""};
  }
  return *v;
}

void define_identity(CLI::App& app, AdapterConfig& c) {
  app.add_option("--engine-endpoint", c.engine_endpoint, "engine ZMQ PUB endpoint (rank 0)");
  app.add_option("--replay-endpoint", c.replay_endpoint,
                 "engine ZMQ ROUTER replay endpoint (rank 0); empty: no replay");
  app.add_option("--topic", c.topic, "subscription prefix; empty: all");
  app.add_option("--dp-size", c.dp_size, "data-parallel ranks; rank r on the ports + r")
      ->check(CLI::Range(1, 1024));
  app.add_option("--server", c.sender.server, "InferenceCache gRPC address host:port");
  app.add_option("--replica-id", c.replica_id, "replica id stamped on every update (required)");
  app.add_option("--model-id", c.identity.model_id, "model id stamped on every update (required)");
  app.add_option("--tenant-id", c.identity.tenant_id, "tenant of every update");
  app.add_option("--hash-scheme", c.identity.hash_scheme, "vllm or sglang");
}

void define_tuning(CLI::App& app, AdapterConfig& c, RawFlags& raw) {
  app.add_option("--window", raw.window.text, "add-batching flush window");
  app.add_option("--engine-metrics-url", c.engine_metrics_url,
                 "engine /metrics scraped for ReplicaStats; empty: no stats");
  app.add_option("--stats-interval", raw.stats_interval.text, "scrape and stats update period");
  app.add_option("--engine-cache-size-bytes", c.stats.engine_cache_size_bytes,
                 "cache_memory_bytes = usage x this")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-concurrency-ceiling", c.stats.max_concurrency_ceiling,
                 "pressure = (running + waiting) / this")
      ->check(CLI::PositiveNumber);
  app.add_option("--cache-tier", raw.cache_tier, "usage gauge: auto, kv, gpu or cpu");
  app.add_option("--engine-model-name", c.stats.engine_model_name,
                 "only metric series with this model_name label");
  app.add_flag("--ignore-block-removed", c.state.ignore_block_removed,
               "an offload tier exists: BlockRemoved downgrades to T2");
  app.add_option("--lora-adapter-names", raw.lora_adapter_names,
                 "id=name,... (an unmapped non-nil lora_id is dropped)");
  app.add_option("--engine-block-size", c.state.engine_block_size,
                 "the server's --engine-block-size (a mismatch is logged and counted)")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--max-tracked-blocks", c.state.max_blocks,
                 "blocks tracked per replica before a resync")
      ->check(CLI::Range(1, 1 << 30));
  app.add_option("--max-queued-entries", c.sender.max_queued_entries,
                 "entries queued for the server before pushes wait")
      ->check(CLI::Range(16, 1 << 26));
  app.add_option("--replay-timeout", raw.replay_timeout.text, "replay silence before a resync");
  app.add_option("--refresh-interval", raw.refresh_interval.text,
                 "re-report every tracked block this often, below the server's TTL; 0: never");
  app.add_option("--http-bind-address", c.http_bind_address,
                 "/metrics and /healthz listener [host]:port; empty: off");
  app.add_option("--log-format", raw.log_format, "json or text");
  app.add_option("--log-level", raw.log_level, "debug, info, warn or error");
}

void validate(AdapterConfig& c, const RawFlags& raw) {
  if (c.replica_id.empty()) throw FlagError{"--replica-id is required"};
  if (c.identity.model_id.empty()) throw FlagError{"--model-id is required"};
  std::string host;
  int port = 0;
  if (!split_host_port(c.sender.server, &host, &port)) {
    throw FlagError{"--server: want host:port, got \"" + c.sender.server + "\""};
  }
  if (c.identity.hash_scheme != "vllm" && c.identity.hash_scheme != "sglang") {
    throw FlagError{"--hash-scheme: want vllm or sglang, got \"" + c.identity.hash_scheme + "\""};
  }
  if (c.engine_endpoint.empty()) throw FlagError{"--engine-endpoint must not be empty"};
  c.window_us = duration_flag("--window", raw.window);
  c.stats_interval_us = duration_flag("--stats-interval", raw.stats_interval);
  c.replay_timeout_us = duration_flag("--replay-timeout", raw.replay_timeout);
  c.refresh_us = raw.refresh_interval.text == "0"
                     ? 0
                     : duration_flag("--refresh-interval", raw.refresh_interval);
  if (raw.cache_tier == "auto") {
    c.stats.cache_tier = CacheTierChoice::automatic;
  } else if (raw.cache_tier == "kv") {
    c.stats.cache_tier = CacheTierChoice::kv;
  } else if (raw.cache_tier == "gpu") {
    c.stats.cache_tier = CacheTierChoice::gpu;
  } else if (raw.cache_tier == "cpu") {
    c.stats.cache_tier = CacheTierChoice::cpu;
  } else {
    throw FlagError{"--cache-tier: want auto, kv, gpu or cpu, got \"" + raw.cache_tier + "\""};
  }
  const auto names = parse_lora_names(raw.lora_adapter_names);
  if (!names) {
    throw FlagError{"--lora-adapter-names: want id=name,id=name, got \"" + raw.lora_adapter_names +
                    "\""};
  }
  c.state.lora_names = *names;
  c.log_format = config::parse_log_format(raw.log_format);
  c.log_level = config::parse_log_level(raw.log_level);
}

}  // namespace

ConfigOutcome parse_config(int argc, const char* const* argv) {
  AdapterConfig c;
  RawFlags raw;
  CLI::App app{"inferencecache-kvevents: feeds InferenceCache from vLLM / SGLang KV events",
               kProgram};
  app.option_defaults()->always_capture_default();  // --help shows each default
  app.set_version_flag("--version", kVersion);
  define_identity(app, c);
  define_tuning(app, c, raw);
  try {
    app.parse(argc, argv);
    validate(c, raw);
  } catch (const CLI::CallForHelp&) {
    return ConfigOutcome{std::nullopt, 0, app.help()};
  } catch (const CLI::CallForVersion&) {
    return ConfigOutcome{std::nullopt, 0, kVersion};
  } catch (const CLI::ParseError& e) {
    return ConfigOutcome{std::nullopt, 2,
                         std::string(kProgram) + ": " + config::one_line(e.what())};
  } catch (const FlagError& e) {
    return ConfigOutcome{std::nullopt, 2, std::string(kProgram) + ": " + config::one_line(e.why)};
  }
  return ConfigOutcome{std::move(c), 0, ""};
}

std::string offset_endpoint(const std::string& endpoint, int offset) {
  if (offset == 0) return endpoint;
  const std::size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || endpoint.rfind("tcp://", 0) != 0) return endpoint;
  int port = 0;
  const char* first = endpoint.data() + colon + 1;
  const char* last = endpoint.data() + endpoint.size();
  const auto [ptr, ec] = std::from_chars(first, last, port);
  if (ec != std::errc() || ptr != last) return endpoint;
  return endpoint.substr(0, colon + 1) + std::to_string(port + offset);
}

std::optional<std::map<std::int64_t, std::string>> parse_lora_names(const std::string& text) {
  std::map<std::int64_t, std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) return std::nullopt;
    std::int64_t id = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + eq, id);
    if (ec != std::errc() || ptr != item.data() + eq) return std::nullopt;
    out[id] = item.substr(eq + 1);
  }
  return out;
}

std::string replica_name(const std::string& replica_id, int dp_size, std::int64_t rank) {
  if (dp_size <= 1) return replica_id;
  return replica_id + "/dp" + std::to_string(rank);
}

}  // namespace ic::tools::kvevents
