#include "config/flags.hh"

#include "buildinfo/build_info.hh"

#include <doctest/doctest.h>

#include <initializer_list>
#include <string>
#include <vector>

using ic::config::FlagsOutcome;
using ic::config::parse_duration_us;
using ic::config::parse_flags;

namespace {

FlagsOutcome parse(std::initializer_list<const char*> args) {
  std::vector<const char*> argv{"inferencecache-server"};
  argv.insert(argv.end(), args.begin(), args.end());
  return parse_flags(static_cast<int>(argv.size()), argv.data());
}

// The exit-2 line for `args`.
// The one error line of a refused command line, without its
// "inferencecache-server: " prefix (checked here).
std::string error_of(std::initializer_list<const char*> args) {
  const FlagsOutcome out = parse(args);
  CHECK_FALSE(out.config.has_value());
  CHECK(out.exit_code == 2);
  CHECK(out.message.find('\n') == std::string::npos);
  const std::string prefix = "inferencecache-server: ";
  REQUIRE(out.message.compare(0, prefix.size(), prefix) == 0);
  return out.message.substr(prefix.size());
}

}  // namespace

TEST_SUITE("runtime") {
  TEST_CASE("flags: defaults match docs/admin.md and our documented ones") {
    const FlagsOutcome out = parse({});
    REQUIRE(out.config.has_value());
    const auto& c = *out.config;
    CHECK(c.grpc_bind_address == ":9090");
    CHECK(c.http_bind_address == ":8080");
    CHECK(c.snapshot_bind_address == ":8081");
    CHECK(c.tls_cert_file.empty());
    CHECK(c.engine_block_size == 16);
    CHECK(c.log_format == ic::config::LogFormat::json);
    CHECK(c.log_level == ic::config::LogLevel::info);
    CHECK_FALSE(c.insecure_disable_auth);
    CHECK(c.threads == 0);
    CHECK(c.pin_threads);
    CHECK(c.max_message_bytes == 4194304);
    CHECK(c.max_concurrent_streams == 1024);
    CHECK(c.stream_reset_burst == 200);
    CHECK(c.stream_reset_rate == 33);
    CHECK(c.max_connections == 10000);
    CHECK(c.idle_timeout_us == 300'000'000);
    CHECK(c.shutdown_grace_us == 10'000'000);
    CHECK(c.index_ttl_us == 1'800'000'000);
    CHECK(c.index_max_entries == 1'000'000);
    CHECK(c.sweep_interval_us == 60'000'000);
  }

  TEST_CASE("flags: values are read, Go-style single dash accepted") {
    const FlagsOutcome out = parse({"--grpc-bind-address",
                                    "127.0.0.1:0",
                                    "-http-bind-address=[::1]:18080",
                                    "--log-format=text",
                                    "--log-level",
                                    "debug",
                                    "--insecure-disable-auth",
                                    "--threads",
                                    "3",
                                    "--idle-timeout",
                                    "1m30s",
                                    "--shutdown-grace",
                                    "500ms",
                                    "--index-ttl",
                                    "2h",
                                    "--sweep-interval",
                                    "1.5s",
                                    "--index-max-entries",
                                    "42",
                                    "--engine-block-size",
                                    "32",
                                    "--pin-threads=false",
                                    "--stream-reset-burst",
                                    "5000",
                                    "--stream-reset-rate=1000"});
    REQUIRE(out.config.has_value());
    const auto& c = *out.config;
    CHECK(c.grpc_bind_address == "127.0.0.1:0");
    CHECK(c.http_bind_address == "[::1]:18080");
    CHECK(c.log_format == ic::config::LogFormat::text);
    CHECK(c.log_level == ic::config::LogLevel::debug);
    CHECK(c.insecure_disable_auth);
    CHECK(c.threads == 3);
    CHECK(c.idle_timeout_us == 90'000'000);
    CHECK(c.shutdown_grace_us == 500'000);
    CHECK(c.index_ttl_us == 7'200'000'000);
    CHECK(c.sweep_interval_us == 1'500'000);
    CHECK(c.index_max_entries == 42);
    CHECK(c.engine_block_size == 32);
    CHECK_FALSE(c.pin_threads);
    CHECK(c.stream_reset_burst == 5000);
    CHECK(c.stream_reset_rate == 1000);
  }

  TEST_CASE("flags: each bad value or combination is one exact line, exit 2") {
    CHECK(error_of({"--log-format", "xml"}) == "--log-format: want json or text, got \"xml\"");
    CHECK(error_of({"--log-level", "trace"}) ==
          "--log-level: want debug, info, warn or error, got \"trace\"");
    CHECK(error_of({"--threads", "abc"}) == "--threads: want an integer in [0, 1024], got \"abc\"");
    CHECK(error_of({"--engine-block-size", "0"}) ==
          "--engine-block-size: want an integer in [1, 65536], got \"0\"");
    CHECK(error_of({"--idle-timeout", "5x"}) ==
          "--idle-timeout: invalid duration \"5x\" (want e.g. 500ms, 10s, 30m, 1h30m)");
    CHECK(error_of({"--index-ttl", "0"}) == "--index-ttl: must be at least 1ms, got \"0\"");
    CHECK(error_of({"--tls-cert-file", "/etc/hostname"}) ==
          "--tls-cert-file given without --tls-key-file (both or neither)");
    CHECK(error_of({"--tls-key-file", "/etc/hostname"}) ==
          "--tls-key-file given without --tls-cert-file (both or neither)");
    CHECK(error_of({"--tls-cert-file", "/nonexistent/c.pem", "--tls-key-file", "/etc/hostname"}) ==
          "--tls-cert-file: cannot read \"/nonexistent/c.pem\": No such file or directory");
    CHECK(error_of({"--stream-reset-rate", "0"}) ==
          "--stream-reset-rate: want an integer in [1, 1048576], got \"0\"");
    CHECK(error_of({"--pin-threads", "maybe"}) ==
          "--pin-threads: want true or false, got \"maybe\"");
    CHECK(error_of({"--no-such-flag"}) == "unknown flag or argument: --no-such-flag");
    CHECK(error_of({"stray"}) == "unknown flag or argument: stray");
    CHECK(error_of({"--insecure-disable-auth", "--control-token-file", "/etc/hostname"}) ==
          "--insecure-disable-auth and --control-token-file contradict each other (give one)");
  }

  TEST_CASE("flags: --version is exit 0 with version, commit, compiler and library versions") {
    const FlagsOutcome out = parse({"--version"});
    CHECK_FALSE(out.config.has_value());
    CHECK(out.exit_code == 0);
    CHECK(out.message == ic::buildinfo::version_text("inferencecache-server"));
    CHECK(out.message.rfind("inferencecache-server 0.1.0\ncommit: ", 0) == 0);
    for (const char* key : {"\nbuild: ", "\ncompiler: ", "\nliburing: ", "\nnghttp2: ",
                            "\nprotobuf: ", "\nopenssl: "}) {
      CAPTURE(key);
      CHECK(out.message.find(key) != std::string::npos);
    }
  }

  TEST_CASE("flags: the ranking and its load-aware knobs (docs/ranking.md)") {
    const FlagsOutcome def = parse({});
    REQUIRE(def.config.has_value());
    CHECK(def.config->ranking == ic::config::Ranking::kWorkAware);
    CHECK(def.config->work_aware.prefill_tokens_per_s == 10'000.0);
    CHECK(def.config->load_aware == ic::config::LoadAwareKnobs{512.0, 64.0, 16.0, 1.0});
    const FlagsOutcome set =
        parse({"--ranking", "reference", "--load-cost-tokens", "128.5", "--load-window", "16",
               "--pressure-load", "0", "--saturation-pressure", "0.95"});
    REQUIRE(set.config.has_value());
    CHECK(set.config->ranking == ic::config::Ranking::kReference);
    CHECK(set.config->load_aware == ic::config::LoadAwareKnobs{128.5, 16.0, 0.0, 0.95});
    const FlagsOutcome load = parse({"--ranking", "load-aware", "--prefill-rate", "6000"});
    REQUIRE(load.config.has_value());
    CHECK(load.config->ranking == ic::config::Ranking::kLoadAware);
    CHECK(load.config->work_aware.prefill_tokens_per_s == 6000.0);
    CHECK(error_of({"--ranking", "best"}) ==
          "--ranking: want work-aware, load-aware or reference, got \"best\"");
    CHECK(error_of({"--prefill-rate", "0"}) ==
          "--prefill-rate: want a number in [1, 1e+09], got \"0\"");
    CHECK(error_of({"--load-window", "0"}) ==
          "--load-window: want a number in [1, 1e+06], got \"0\"");
    CHECK(error_of({"--load-cost-tokens", "-1"}) ==
          "--load-cost-tokens: want a number in [0, 1e+09], got \"-1\"");
    CHECK(error_of({"--pressure-load", "x"}) ==
          "--pressure-load: want a number in [0, 1e+06], got \"x\"");
  }

  TEST_CASE("flags: a flag without its value is an error line") {
    CHECK(error_of({"--threads"}).find("--threads") != std::string::npos);
  }

  TEST_CASE("flags: --help is exit 0 with the usage text") {
    const FlagsOutcome out = parse({"--help"});
    CHECK_FALSE(out.config.has_value());
    CHECK(out.exit_code == 0);
    CHECK(out.message.find("--grpc-bind-address") != std::string::npos);
    CHECK(out.message.find("--shutdown-grace") != std::string::npos);
  }

  TEST_CASE("durations parse the Go time.Duration syntax into µs") {
    CHECK(parse_duration_us("0") == 0);
    CHECK(parse_duration_us("500ms") == 500'000);
    CHECK(parse_duration_us("10s") == 10'000'000);
    CHECK(parse_duration_us("30m") == 1'800'000'000);
    CHECK(parse_duration_us("1h30m") == 5'400'000'000);
    CHECK(parse_duration_us("1.5s") == 1'500'000);
    CHECK(parse_duration_us("250us") == 250);
    CHECK(parse_duration_us("250\xC2\xB5s") == 250);
    CHECK(parse_duration_us("1500ns") == 1);
    CHECK_FALSE(parse_duration_us("").has_value());
    CHECK_FALSE(parse_duration_us("10").has_value());
    CHECK_FALSE(parse_duration_us("-1s").has_value());
    CHECK_FALSE(parse_duration_us("1.2.3s").has_value());
    CHECK_FALSE(parse_duration_us("s").has_value());
    CHECK_FALSE(parse_duration_us("5d").has_value());
  }
}
