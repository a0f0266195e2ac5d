// Running the server under the process's signals (server/app.hh).

#include <signal.h>

#include <atomic>

#include "base/log.hh"
#include "server/app.hh"

namespace ic::server {

namespace {

using ic::base::LogLevel;

// How often the signal thread stats the TLS certificate and key for changes.
constexpr timespec kTlsPoll{1, 0};

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
      ic::base::log(LogLevel::warn, "second signal: stopping without waiting for calls");
      return;
    }
  }
}

}  // namespace

sigset_t signal_set(std::initializer_list<int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : signals) sigaddset(&set, sig);
  return set;
}

int run(const ServerConfig& config) {
  const sigset_t term = signal_set({SIGTERM, SIGINT});

  App app(config);
  if (!app.load_policies() || !app.load_tls() || !app.check_nats_creds() ||
      !app.load_tokenizer_models() || !app.load_templates()) {
    return kExitUsage;
  }
  app.build_shards();
  if (std::optional<int> stop = app.load_state()) return *stop;
  if (std::string error = app.add_listeners(); !error.empty()) {
    ic::base::log(LogLevel::error, "cannot listen", {{"error", error}});
    return kExitStartup;
  }
  app.install_collectors();
  if (std::string error = app.start_runtime(); !error.empty()) {
    ic::base::log(
        LogLevel::error, "reactors not started",
        {{"reactor_backend", std::string(ic::runtime::backend_name(app.runtime.backend()))},
         {"error", error},
         {"hint", kIoUringHint}});
    return kExitStartup;
  }
  if (app.replicator) app.replicator->start();
  if (app.state_saver) app.state_saver->start();

  const int sig = serve_signals(app);
  ic::base::log(LogLevel::info, "shutting down",
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
  ic::base::log(LogLevel::info, "stopped", {{"exit_code", 0}});
  return 0;
}
}  // namespace ic::server
