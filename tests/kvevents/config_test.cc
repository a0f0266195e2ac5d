// Flag parsing of inferencecache-kvevents: names kept from the earlier sidecar, exit 2 on misuse.
#include "kvevents/config.hh"

#include <doctest/doctest.h>

#include <vector>

namespace ic::tools::kvevents {
namespace {

ConfigOutcome parse(std::vector<const char*> args) {
  args.insert(args.begin(), "inferencecache-kvevents");
  return parse_config(static_cast<int>(args.size()), args.data());
}

}  // namespace

TEST_CASE("defaults and every flag") {
  const auto d = parse({"--replica-id", "r", "--model-id", "m"});
  REQUIRE(d.config.has_value());
  CHECK(d.config->engine_endpoint == "tcp://127.0.0.1:5557");
  CHECK(d.config->topic == "kv-events");
  CHECK(d.config->sender.server == "127.0.0.1:9090");
  CHECK(d.config->identity.hash_scheme == "vllm");
  CHECK(d.config->window_us == 100'000);
  CHECK(d.config->stats_interval_us == 10'000'000);
  CHECK(d.config->stats.max_concurrency_ceiling == 256);
  CHECK(d.config->refresh_us == 600'000'000);
  CHECK(parse({"--replica-id", "r", "--model-id", "m", "--refresh-interval", "0"})
            .config->refresh_us == 0);
  CHECK(parse({"--replica-id", "r", "--model-id", "m", "--refresh-interval", "90s"})
            .config->refresh_us == 90'000'000);
  const auto c = parse({"--replica-id",
                        "r",
                        "--model-id",
                        "m",
                        "--tenant-id",
                        "t",
                        "--hash-scheme",
                        "sglang",
                        "--window",
                        "5ms",
                        "--lora-adapter-names",
                        "1=sql,2=chat",
                        "--cache-tier",
                        "gpu",
                        "--ignore-block-removed",
                        "--dp-size",
                        "4",
                        "--replay-endpoint",
                        "tcp://127.0.0.1:5558",
                        "--stats-interval",
                        "1s"});
  REQUIRE(c.config.has_value());
  CHECK(c.config->identity.tenant_id == "t");
  CHECK(c.config->identity.hash_scheme == "sglang");
  CHECK(c.config->window_us == 5000);
  CHECK(c.config->state.lora_names == std::map<std::int64_t, std::string>{{1, "sql"}, {2, "chat"}});
  CHECK(c.config->stats.cache_tier == CacheTierChoice::gpu);
  CHECK(c.config->state.ignore_block_removed);
  CHECK(c.config->dp_size == 4);
  CHECK(c.config->stats_interval_us == 1'000'000);
}

TEST_CASE("usage errors: exit 2 with one line") {
  for (const auto& args : std::vector<std::vector<const char*>>{
           {"--model-id", "m"},
           {"--replica-id", "r"},
           {"--replica-id", "r", "--model-id", "m", "--hash-scheme", ""},
           {"--replica-id", "r", "--model-id", "m", "--window", "soon"},
           {"--replica-id", "r", "--model-id", "m", "--lora-adapter-names", "x=1"},
           {"--replica-id", "r", "--model-id", "m", "--cache-tier", "hbm"},
           {"--replica-id", "r", "--model-id", "m", "--dp-size", "0"},
           {"--replica-id", "r", "--model-id", "m", "--server", "inferencecache"},
           {"--replica-id", "r", "--model-id", "m", "--server", "inferencecache:0"},
           {"--replica-id", "r", "--model-id", "m", "--server", ":9090"},
           {"--replica-id", "r", "--model-id", "m", "--refresh-interval", "500ms"},
           {"--replica-id", "r", "--model-id", "m", "--unknown"}}) {
    const auto o = parse(args);
    CHECK_FALSE(o.config.has_value());
    CHECK(o.exit_code == 2);
    CHECK(o.message.rfind("inferencecache-kvevents: ", 0) == 0);
    CHECK(o.message.find('\n') == std::string::npos);
  }
  const auto v = parse({"--version"});
  CHECK(v.exit_code == 0);
  CHECK(v.message == "inferencecache-kvevents 0.1.0");
}

// The server's parsers (config/flags.hh): the same values, the same messages.
TEST_CASE("--log-format and --log-level are checked as the server checks them") {
  CHECK(parse({"--replica-id", "r", "--model-id", "m", "--log-format", "xml"}).message ==
        "inferencecache-kvevents: --log-format: want json or text, got \"xml\"");
  CHECK(parse({"--replica-id", "r", "--model-id", "m", "--log-level", "trace"}).message ==
        "inferencecache-kvevents: --log-level: want debug, info, warn or error, got \"trace\"");
  const auto o = parse(
      {"--replica-id", "r", "--model-id", "m", "--log-format", "text", "--log-level", "warn"});
  REQUIRE(o.config.has_value());
  CHECK(o.config->log_format == ic::base::LogFormat::text);
  CHECK(o.config->log_level == ic::base::LogLevel::warn);
}

TEST_CASE("DP endpoints, replica names, LoRA maps") {
  CHECK(offset_endpoint("tcp://127.0.0.1:5557", 0) == "tcp://127.0.0.1:5557");
  CHECK(offset_endpoint("tcp://127.0.0.1:5557", 3) == "tcp://127.0.0.1:5560");
  CHECK(offset_endpoint("tcp://*:5557", 1) == "tcp://*:5558");
  CHECK(offset_endpoint("ipc:///tmp/kv", 1) == "ipc:///tmp/kv");
  CHECK(replica_name("r", 1, 0) == "r");
  CHECK(replica_name("r", 2, 0) == "r/dp0");
  CHECK(replica_name("r", 2, 1) == "r/dp1");
  CHECK(parse_lora_names("") == std::map<std::int64_t, std::string>{});
  CHECK_FALSE(parse_lora_names("1=").has_value());
  CHECK_FALSE(parse_lora_names("=a").has_value());
}

}  // namespace ic::tools::kvevents
