// inferencecache-server: the composition root.
//
// Start order (ARCHITECTURE.md rule 10): flags → logging → runtime → per-core
// state (index partitions, services) → listeners bound → reactor threads
// start, each arming its accepts last. SIGTERM/SIGINT: listeners close, every
// connection gets GOAWAY, in-flight calls finish within --shutdown-grace,
// connections close, reactors stop and join, exit 0.

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "config/flags.hh"
#include "config/log.hh"
#include "grpc/call.hh"
#include "grpc/session.hh"
#include "grpc/timers.hh"
#include "net/address.hh"
#include "net/server.hh"
#include "runtime/runtime.hh"

namespace {

using ic::config::LogLevel;
using ic::config::ServerConfig;

constexpr int kExitUsage = 2;
constexpr int kExitStartup = 1;

// grpc::Timers on the connection's core reactor (call deadlines).
class ReactorTimers final : public ic::grpc::Timers {
 public:
  void bind(ic::runtime::Reactor& reactor) { reactor_ = &reactor; }
  std::int64_t now_us() const override { return reactor_->now_us(); }
  TimerId add_timer(std::int64_t delay_us, ic::runtime::Task task) override {
    return reactor_->add_timer(delay_us, std::move(task));
  }
  void cancel_timer(TimerId id) override { reactor_->cancel_timer(id); }

 private:
  ic::runtime::Reactor* reactor_ = nullptr;
};

// What the gRPC sessions of one core share; lives until the runtime joined.
struct CoreGrpc {
  ReactorTimers timers;
  ic::grpc::ServerContext context;
};

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

sigset_t termination_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

// Blocks until SIGTERM/SIGINT; returns the signal number.
int wait_for_signal(const sigset_t& set) {
  for (;;) {
    const int sig = sigwaitinfo(&set, nullptr);
    if (sig > 0) return sig;
  }
}

// Waits for `drained` (set by a reactor) while honouring a second signal,
// which skips the rest of the grace period.
void wait_drained(const std::atomic<bool>& drained, const sigset_t& set) {
  const timespec tick{0, 20'000'000};
  while (!drained.load(std::memory_order_acquire)) {
    if (sigtimedwait(&set, nullptr, &tick) > 0) {
      ic::config::log(LogLevel::warn, "second signal: stopping without waiting for calls");
      return;
    }
  }
}

int run(const ServerConfig& config) {
  // Signals are taken synchronously by the main thread; reactor threads
  // inherit the blocked mask and never see them. SIGPIPE never matters: sends
  // use MSG_NOSIGNAL.
  const sigset_t term = termination_signals();
  pthread_sigmask(SIG_BLOCK, &term, nullptr);
  signal(SIGPIPE, SIG_IGN);

  ic::runtime::Runtime runtime(ic::runtime::Runtime::Options{.cores = config.threads});
  const unsigned cores = runtime.cores();

  // Services: the gRPC method table shared by every core's sessions.
  ic::grpc::MethodTable methods;
  std::vector<std::unique_ptr<CoreGrpc>> grpc_cores;
  for (unsigned core = 0; core < cores; ++core) {
    auto g = std::make_unique<CoreGrpc>();
    g->context.methods = &methods;
    g->context.options.max_message_bytes = config.max_message_bytes;
    g->context.options.h2.max_concurrent_streams = config.max_concurrent_streams;
    g->context.timers = &g->timers;
    grpc_cores.push_back(std::move(g));
  }

  // Listeners: bound now so a busy port fails the start, armed last.
  ic::net::Server server(runtime);
  ic::net::ListenerOptions grpc;
  grpc.name = "grpc";
  grpc.address = config.grpc_bind_address;
  grpc.max_connections = config.max_connections;
  grpc.idle_timeout_us = config.idle_timeout_us;
  grpc.output_high_water = std::size_t{4} << 20;
  grpc.factory = [&grpc_cores](ic::net::Connection& conn) -> std::unique_ptr<ic::net::Session> {
    return std::make_unique<ic::grpc::GrpcSession>(conn, grpc_cores[conn.core()]->context);
  };
  if (std::string error = server.add_listener(std::move(grpc)); !error.empty()) {
    ic::config::log(LogLevel::error, "cannot listen", {{"listener", "grpc"}, {"error", error}});
    return kExitStartup;
  }

  std::atomic<unsigned> started{0};
  runtime.start([&](unsigned core) {
    grpc_cores[core]->timers.bind(runtime.reactor(core));
    server.start_core(core);  // listeners last
    if (started.fetch_add(1) + 1 == cores) {
      ic::config::log(
          LogLevel::info, "serving",
          {{"grpc_port", std::to_string(server.port("grpc"))}, {"threads", std::to_string(cores)}});
    }
  });

  const int sig = wait_for_signal(term);
  ic::config::log(LogLevel::info, "shutting down",
                  {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"},
                   {"grace_ms", std::to_string(config.shutdown_grace_us / 1000)}});
  std::atomic<bool> drained{false};
  server.shutdown(config.shutdown_grace_us,
                  [&drained] { drained.store(true, std::memory_order_release); });
  wait_drained(drained, term);
  runtime.stop();
  runtime.join();
  ic::config::log(LogLevel::info, "stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const ic::config::FlagsOutcome flags = ic::config::parse_flags(argc, argv);
  if (!flags.config) {
    std::fprintf(flags.exit_code == 0 ? stdout : stderr, "%s\n", flags.message.c_str());
    return flags.exit_code;
  }
  const ServerConfig& config = *flags.config;
  if (std::string error = check_addresses(config); !error.empty()) {
    std::fprintf(stderr, "inferencecache-server: %s\n", error.c_str());
    return kExitUsage;
  }
  ic::config::configure_logging(config.log_format, config.log_level);
  return run(config);
}
