#include "config/flags.hh"

#include "buildinfo/build_info.hh"
#include "support/temp_dir.hh"

#include <doctest/doctest.h>
#include <stdlib.h>

#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <sstream>
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

// Why a refused command line is refused (exit 2): the one line main logs.
std::string error_of(std::initializer_list<const char*> args) {
  const FlagsOutcome out = parse(args);
  CHECK_FALSE(out.config.has_value());
  CHECK(out.exit_code == 2);
  CHECK(out.message.find('\n') == std::string::npos);
  return out.message;
}

// Sets an environment variable for one scope and unsets it on exit, also when a
// REQUIRE leaves the test midway (the INFERENCECACHE_* variables are unset in a test run).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  void set(const char* value) { ::setenv(name_, value, 1); }

 private:
  const char* name_;
};

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
    CHECK(c.log_format == ic::base::LogFormat::json);
    CHECK(c.log_level == ic::base::LogLevel::info);
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
    CHECK(c.log_format == ic::base::LogFormat::text);
    CHECK(c.log_level == ic::base::LogLevel::debug);
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
    // A floor under 1ms is said in its own unit (it read "at least 0ms").
    CHECK(error_of({"--gateway-tokenize-budget", "50us"}) ==
          "--gateway-tokenize-budget: must be at least 100us, got \"50us\"");
    CHECK(error_of({"--metrics-stream-interval", "10ms"}) ==
          "--metrics-stream-interval: must be at least 100ms, got \"10ms\"");
    CHECK(error_of({"--tls-cert-file", "/etc/hostname"}) ==
          "--tls-cert-file given without --tls-key-file (both or neither)");
    CHECK(error_of({"--tls-key-file", "/etc/hostname"}) ==
          "--tls-key-file given without --tls-cert-file (both or neither)");
    CHECK(error_of({"--tls-cert-file", "/nonexistent/c.pem", "--tls-key-file", "/etc/hostname"}) ==
          "--tls-cert-file: cannot read \"/nonexistent/c.pem\": No such file or directory");
    CHECK(error_of({"--nats-tls-cert-file", "/etc/hostname"}) ==
          "--nats-tls-cert-file given without --nats-tls-key-file (both or neither)");
    CHECK(error_of({"--nats-tls-ca-file", "/nonexistent/ca.pem"}) ==
          "--nats-tls-ca-file: cannot read \"/nonexistent/ca.pem\": No such file or directory");
    CHECK(error_of({"--nats-creds-file", "/nonexistent/user.creds"}) ==
          "--nats-creds-file: cannot read \"/nonexistent/user.creds\": No such file or directory");
    CHECK(error_of({"--nats-url", "http://127.0.0.1:4222"}) ==
          "--nats-url: \"http://127.0.0.1:4222\" is not a NATS server URL (want "
          "[nats://|tls://][user:password@]host[:port], comma-separated)");
    for (const char* bad : {"nats://a:4222,", "nats://", "nats://a:", "nats://a:0", "a:65536",
                            "a:42x", "nats://a b:4222", "nats://a/x", "[::1", "[::1]x"}) {
      CHECK(error_of({"--nats-url", bad}).rfind("--nats-url: ", 0) == 0);
    }
    for (const char* good :
         {"nats://127.0.0.1:4222", "tls://u:p@nats.example:4443", "nats-0.nats,nats-1.nats:4222",
          "NATS://[::1]:4222", "nats://[fd00::7]", " nats://a:1 , nats://b:2"}) {
      CHECK(parse({"--nats-url", good}).config.has_value());
    }
    CHECK(error_of({"--stream-reset-rate", "0"}) ==
          "--stream-reset-rate: want an integer in [1, 1048576], got \"0\"");
    CHECK(error_of({"--pin-threads", "maybe"}) ==
          "--pin-threads: want true or false, got \"maybe\"");
    CHECK(error_of({"--no-such-flag"}) == "unknown flag or argument: --no-such-flag");
    CHECK(error_of({"stray"}) == "unknown flag or argument: stray");
    CHECK(error_of({"--insecure-disable-auth", "--control-token-file", "/etc/hostname"}) ==
          "--insecure-disable-auth and --control-token-file contradict each other (give one)");
  }

  TEST_CASE("flags: a refused command line's error line is in the --log-format it asked for") {
    using ic::base::LogFormat;
    CHECK(parse({"--threads", "x"}).log_format == LogFormat::json);
    CHECK(parse({"--log-format", "text", "--threads", "x"}).log_format == LogFormat::text);
    CHECK(parse({"--threads", "x", "-log-format=text"}).log_format == LogFormat::text);
    CHECK(parse({"--no-such-flag", "--log-format", "text"}).log_format == LogFormat::text);
    CHECK(parse({"--log-format", "xml"}).log_format == LogFormat::json);  // its own value is bad
    CHECK(parse({"--log-format", "text", "--log-format", "xml"}).log_format == LogFormat::json);
    {
      const ScopedEnv format("INFERENCECACHE_LOG_FORMAT", "text");
      CHECK(parse({"--threads", "x"}).log_format == LogFormat::text);
      CHECK(parse({"--threads", "x", "--log-format", "json"}).log_format == LogFormat::json);
    }
    const std::string file =
        ic::test::write_temp_file("ic-flags", "log-format = \"text\"\nthreads = \"x\"\n");
    const FlagsOutcome from_file = parse({"--config", file.c_str()});
    CHECK(from_file.exit_code == 2);
    CHECK(from_file.message == "--threads: want an integer in [0, 1024], got \"x\"");
    CHECK(from_file.log_format == LogFormat::text);
    std::remove(file.c_str());
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
    CHECK(def.config->work_aware.uncached_weight == 0.8);
    CHECK(def.config->load_aware == ic::config::LoadAwareKnobs{512.0, 64.0, 16.0, 1.0});
    const FlagsOutcome set =
        parse({"--ranking", "reference", "--load-cost-tokens", "128.5", "--load-window", "16",
               "--pressure-load", "0", "--saturation-pressure", "0.95"});
    REQUIRE(set.config.has_value());
    CHECK(set.config->ranking == ic::config::Ranking::kReference);
    CHECK(set.config->load_aware == ic::config::LoadAwareKnobs{128.5, 16.0, 0.0, 0.95});
    const FlagsOutcome load =
        parse({"--ranking", "load-aware", "--prefill-rate", "6000", "--uncached-weight", "0.75"});
    REQUIRE(load.config.has_value());
    CHECK(load.config->ranking == ic::config::Ranking::kLoadAware);
    CHECK(load.config->work_aware.prefill_tokens_per_s == 6000.0);
    CHECK(load.config->work_aware.uncached_weight == 0.75);
    for (const char* bound : {"0.1", "1"}) {
      const FlagsOutcome edge = parse({"--uncached-weight", bound});
      REQUIRE(edge.config.has_value());
      CHECK(edge.config->work_aware.uncached_weight == std::stod(bound));
    }
    CHECK(error_of({"--uncached-weight", "0"}) ==
          "--uncached-weight: want a number in [0.1, 1], got \"0\"");
    CHECK(error_of({"--uncached-weight", "1.5"}) ==
          "--uncached-weight: want a number in [0.1, 1], got \"1.5\"");
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

  TEST_CASE("flags: --max-connection-age and its grace (off by default)") {
    const FlagsOutcome def = parse({});
    REQUIRE(def.config.has_value());
    CHECK(def.config->max_connection_age_us == 0);
    CHECK(def.config->max_connection_age_grace_us == 10'000'000);
    const FlagsOutcome set =
        parse({"--max-connection-age", "30m", "--max-connection-age-grace", "1m30s"});
    REQUIRE(set.config.has_value());
    CHECK(set.config->max_connection_age_us == 1'800'000'000);
    CHECK(set.config->max_connection_age_grace_us == 90'000'000);
    CHECK(error_of({"--max-connection-age", "soon"}) ==
          "--max-connection-age: invalid duration \"soon\" (want e.g. 500ms, 10s, 30m, 1h30m)");
  }

  TEST_CASE(
      "flags: the subscriber caps and the prompt_text bounds (docs/streams.md, "
      "docs/prompt-text.md)") {
    const FlagsOutcome def = parse({});
    REQUIRE(def.config.has_value());
    CHECK(def.config->events_stream_max_subscribers == 128);
    CHECK(def.config->metrics_stream_max_subscribers == 128);
    CHECK(def.config->prompt_text_max_cpu_us == 50'000);
    CHECK(def.config->prompt_text_max_jobs == 64);
    CHECK(def.config->prompt_text_max_jobs_per_tenant == 8);
    const FlagsOutcome set =
        parse({"--events-stream-max-subscribers", "2", "--metrics-stream-max-subscribers=3",
               "--prompt-text-max-cpu", "200ms", "--prompt-text-max-jobs", "256",
               "--prompt-text-max-jobs-per-tenant", "16"});
    REQUIRE(set.config.has_value());
    CHECK(set.config->events_stream_max_subscribers == 2);
    CHECK(set.config->metrics_stream_max_subscribers == 3);
    CHECK(set.config->prompt_text_max_cpu_us == 200'000);
    CHECK(set.config->prompt_text_max_jobs == 256);
    CHECK(set.config->prompt_text_max_jobs_per_tenant == 16);
    CHECK(error_of({"--events-stream-max-subscribers", "0"}) ==
          "--events-stream-max-subscribers: want an integer in [1, 65536], got \"0\"");
    CHECK(error_of({"--prompt-text-max-cpu", "500us"}) ==
          "--prompt-text-max-cpu: must be at least 1ms, got \"500us\"");
  }

  TEST_CASE("flags: --help shows each flag's type, range or choices, default and variable") {
    const FlagsOutcome out = parse({"--help"});
    REQUIRE(out.exit_code == 0);
    const std::string& help = out.message;
    for (const char* line : {
             "--threads INT in [0, 1024]=0",
             "--engine-block-size INT in [1, 65536]=16",
             "--idle-timeout DURATION=5m",
             "--index-ttl DURATION >= 1ms=30m",
             "--metrics-stream-interval DURATION >= 100ms=10s",
             "--log-format {json,text}=json",
             "--log-level {debug,info,warn,error}=info",
             "--ranking {work-aware,load-aware,reference}=work-aware",
             "--reactor-backend {auto,io_uring,epoll}=auto",
             "--pin-threads {true,false}=true",
             "--load-window NUMBER in [1, 1e+06]=64",
             "--uncached-weight NUMBER in [0.1, 1]=0.8",
             "--max-connection-age DURATION=0",
             "--max-connection-age-grace DURATION=10s",
             "--grpc-bind-address TEXT=:9090",
             "(Env:INFERENCECACHE_THREADS)",
             "(Env:INFERENCECACHE_GRPC_BIND_ADDRESS)",
             "--tls-cert-file TEXT=\"\" (Env:INFERENCECACHE_TLS_CERT_FILE)",
             "--insecure-disable-auth SWITCH=off (Env:INFERENCECACHE_INSECURE_DISABLE_AUTH)",
             "--gateway SWITCH=on (Env:INFERENCECACHE_GATEWAY)",
             "--spread-tenants LIST=\"\" (Env:INFERENCECACHE_SPREAD_TENANTS)",
             "--config FILE=\"\" (Env:INFERENCECACHE_CONFIG)",
         }) {
      CAPTURE(line);
      CHECK(help.find(line) != std::string::npos);
    }
    CHECK(help.find("TEXT=4194304") == std::string::npos);  // no number shown as TEXT
    // Every flag that takes or sets a value shows its default: "--name TYPE=DEFAULT (Env:...)".
    std::istringstream lines(help);
    int flags = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("  --", 0) != 0 || line.rfind("  --version", 0) == 0) continue;
      CAPTURE(line);
      ++flags;
      const std::size_t name_end = line.find(' ', 2);
      const std::size_t env = line.find(" (Env:INFERENCECACHE_");
      REQUIRE(name_end != std::string::npos);
      REQUIRE(env != std::string::npos);
      CHECK(line.substr(name_end + 1, env - name_end - 1).find('=') != std::string::npos);
    }
    CHECK(flags == 66);
  }

  TEST_CASE("flags: environment and --config file; flag > environment > file > default") {
    const std::string file = ic::test::write_temp_file(
        "ic-flags",
        "threads = 4\nidle-timeout = \"90s\"\nlog-level = \"debug\"\ninsecure-disable-auth = true\n"
        "spread-tenants = [\"a\", \"b\"]\nmax-connection-age = \"1h\"\n");
    const FlagsOutcome from_file = parse({"--config", file.c_str()});
    REQUIRE(from_file.config.has_value());
    CHECK(from_file.config->threads == 4);
    CHECK(from_file.config->idle_timeout_us == 90'000'000);
    CHECK(from_file.config->log_level == ic::base::LogLevel::debug);
    CHECK(from_file.config->insecure_disable_auth);
    CHECK(from_file.config->spread_tenants == std::vector<std::string>{"a", "b"});
    CHECK(from_file.config->max_connection_age_us == 3'600'000'000);

    {
      ScopedEnv threads("INFERENCECACHE_THREADS", "6");
      const ScopedEnv ttl("INFERENCECACHE_INDEX_TTL", "2h");
      const ScopedEnv pin("INFERENCECACHE_PIN_THREADS", "false");
      const ScopedEnv format("INFERENCECACHE_LOG_FORMAT", "");  // empty: as if unset
      const FlagsOutcome env = parse({"--config", file.c_str()});
      REQUIRE(env.config.has_value());
      CHECK(env.config->threads == 6);                   // environment over file
      CHECK(env.config->idle_timeout_us == 90'000'000);  // file over default
      CHECK(env.config->index_ttl_us == 7'200'000'000);
      CHECK_FALSE(env.config->pin_threads);
      CHECK(env.config->log_format == ic::base::LogFormat::json);
      const FlagsOutcome flag = parse({"--config", file.c_str(), "-threads=2"});
      REQUIRE(flag.config.has_value());
      CHECK(flag.config->threads == 2);  // command line over environment
      {
        // A switch, from the environment.
        const ScopedEnv auth("INFERENCECACHE_INSECURE_DISABLE_AUTH", "false");
        const FlagsOutcome off = parse({"--config", file.c_str()});
        REQUIRE(off.config.has_value());
        CHECK_FALSE(off.config->insecure_disable_auth);
      }
      {
        const ScopedEnv config("INFERENCECACHE_CONFIG", file.c_str());
        const FlagsOutcome env_config = parse({});
        REQUIRE(env_config.config.has_value());
        CHECK(env_config.config->log_level == ic::base::LogLevel::debug);
      }
      // A bad value from the environment names the variable the operator set.
      threads.set("many");
      CHECK(error_of({}) ==
            "--threads (from INFERENCECACHE_THREADS): want an integer in [0, 1024], got \"many\"");
      {
        const ScopedEnv url("INFERENCECACHE_NATS_URL", "http://nats:4222");
        CHECK(error_of({"--threads", "2"}) ==
              "--nats-url (from INFERENCECACHE_NATS_URL): \"http://nats:4222\" is not a NATS "
              "server URL (want [nats://|tls://][user:password@]host[:port], comma-separated)");
      }
      // The command line's own value is named as the flag alone.
      CHECK(error_of({"--threads", "few"}) ==
            "--threads: want an integer in [0, 1024], got \"few\"");
    }
    for (const char* name : {"INFERENCECACHE_THREADS", "INFERENCECACHE_INDEX_TTL",
                             "INFERENCECACHE_PIN_THREADS", "INFERENCECACHE_LOG_FORMAT",
                             "INFERENCECACHE_INSECURE_DISABLE_AUTH", "INFERENCECACHE_CONFIG"}) {
      CHECK(::getenv(name) == nullptr);  // the guards unset them
    }

    const std::string bad = ic::test::write_temp_file("ic-flags", "threadz = 4\n");
    CHECK(error_of({"--config", bad.c_str()}) ==
          "--config: unknown flag \"threadz\" in the file (names are the flags' without the "
          "dashes)");
    const std::string bad_value = ic::test::write_temp_file("ic-flags", "index-ttl = \"0\"\n");
    CHECK(error_of({"--config", bad_value.c_str()}) ==
          "--index-ttl: must be at least 1ms, got \"0\"");
    CHECK(error_of({"--config", "/nonexistent/server.toml"}) ==
          "--config: cannot read \"/nonexistent/server.toml\": No such file or directory");
    for (const std::string& path : {file, bad, bad_value}) std::remove(path.c_str());
  }

  TEST_CASE("flags: the --config example of docs/admin.md, exactly as written") {
    std::ifstream doc(IC_ADMIN_DOC);
    std::stringstream text;
    text << doc.rdbuf();
    const std::string all = text.str();
    const std::size_t open = all.find("```toml\n");
    REQUIRE(open != std::string::npos);
    const std::size_t begin = open + 8;
    const std::size_t end = all.find("```", begin);
    REQUIRE(end != std::string::npos);
    const std::string file = ic::test::write_temp_file("ic-flags", all.substr(begin, end - begin));
    const FlagsOutcome out = parse({"--config", file.c_str()});
    std::remove(file.c_str());
    REQUIRE(out.config.has_value());
    CHECK(out.config->grpc_bind_address == ":9090");
    CHECK(out.config->threads == 4);
    CHECK(out.config->log_level == ic::base::LogLevel::debug);
    CHECK(out.config->max_connection_age_us == 1'800'000'000);
    CHECK_FALSE(out.config->pin_threads);
    CHECK(out.config->spread_tenants == std::vector<std::string>{"team-a", "team-b"});
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

  TEST_CASE("flags: --reactor-backend is auto, io_uring or epoll; auto by default") {
    using ic::config::ReactorBackend;
    CHECK(parse({}).config->reactor_backend == ReactorBackend::kAuto);
    CHECK(parse({"--reactor-backend", "io_uring"}).config->reactor_backend ==
          ReactorBackend::kIoUring);
    CHECK(parse({"--reactor-backend=epoll"}).config->reactor_backend == ReactorBackend::kEpoll);
    CHECK(parse({"--reactor-backend", "auto"}).config->reactor_backend == ReactorBackend::kAuto);
    CHECK(error_of({"--reactor-backend", "kqueue"}) ==
          "--reactor-backend: want auto, io_uring or epoll, got \"kqueue\"");
  }
}
