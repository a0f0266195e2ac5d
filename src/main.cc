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
  if (!flags.config) {
    const bool newline = flags.message.empty() || flags.message.back() != '\n';
    std::fprintf(flags.exit_code == 0 ? stdout : stderr, "%s%s", flags.message.c_str(),
                 newline ? "\n" : "");
    return flags.exit_code;
  }
  const ic::config::ServerConfig& config = *flags.config;
  if (std::string error = ic::server::check_addresses(config); !error.empty()) {
    std::fprintf(stderr, "inferencecache-server: %s\n", error.c_str());
    return ic::server::kExitUsage;
  }
  ic::base::configure_logging(config.log_format, config.log_level);
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
