// inferencecache-server: flags, logging and signals, then the composition
// root (server/app.hh: start order, drain and reload).

#include <signal.h>

#include <cstdio>
#include <exception>
#include <string>

#include "base/log.hh"
#include "config/flags.hh"
#include "server/app.hh"

int main(int argc, char** argv) {
  // Signals are taken synchronously by the main thread; every thread started
  // later (log writer, reactors) inherits the blocked mask, so SIGHUP can
  // never kill the server, not even during startup (it stays pending and is
  // served once the server runs). Sends use MSG_NOSIGNAL; SIGPIPE is ignored.
  const sigset_t blocked = ic::server::signal_set({SIGTERM, SIGINT, SIGHUP});
  pthread_sigmask(SIG_BLOCK, &blocked, nullptr);
  signal(SIGPIPE, SIG_IGN);
  const ic::config::FlagsOutcome flags = ic::config::parse_flags(argc, argv);
  if (!flags.config && flags.exit_code == 0) {  // --help, --version
    const bool newline = flags.message.empty() || flags.message.back() != '\n';
    std::fprintf(stdout, "%s%s", flags.message.c_str(), newline ? "\n" : "");
    return 0;
  }
  // Every failed start is one error line of the log, in the --log-format asked
  // for, and exit 2 for a refused configuration or 1 for a start step that
  // failed (docs/admin.md "Exit statuses").
  if (!flags.config) {
    ic::base::configure_logging(flags.log_format, ic::base::LogLevel::info);
    ic::base::log(ic::base::LogLevel::error, "bad flag value", {{"error", flags.message}});
    return ic::server::kExitUsage;
  }
  const ic::config::ServerConfig& config = *flags.config;
  ic::base::configure_logging(config.log_format, config.log_level);
  if (std::string error = ic::server::check_addresses(config); !error.empty()) {
    ic::base::log(ic::base::LogLevel::error, "bad flag value", {{"error", error}});
    return ic::server::kExitUsage;
  }
  ic::base::start_log_writer();
  int code = ic::server::kExitStartup;
  try {
    code = ic::server::run(config);
  } catch (const std::exception& e) {
    // Whatever a start step threw (a resource the kernel refused): one log
    // line and exit 1, never std::terminate's abort.
    ic::base::log(ic::base::LogLevel::error, "server failed", {{"error", e.what()}});
  }
  ic::base::stop_log_writer();
  return code;
}
