// Policies and reloads (server/app.hh): core 0 owns the --policy-file store
// and broadcasts every installed set to all cores; SIGHUP re-reads the files.

#include <atomic>

#include "admin/auth.hh"
#include "base/log.hh"
#include "runtime/map_reduce.hh"
#include "server/app.hh"

namespace ic::server {

using ic::base::LogLevel;

// A full mailbox retries from a timer (every ms): a policy change must not be lost.
void App::broadcast_policies(std::shared_ptr<const ic::config::PolicySet> set) {
  ic::runtime::invoke_on_all(
      runtime, [this, set](unsigned core) { index->set_policies(core, set); },
      ic::runtime::Wait{.retry_us = 1000});
}

// Core 0 owns the --policy-file store (not thread-safe) and fans changes out.
void App::poll_policy_file() {
  const std::uint64_t errors = policy_file->error_count();
  report_policy_file(policy_file->poll(), errors);
  runtime.reactor(0).add_timer(kPolicyPollUs, [this] { poll_policy_file(); });
}

// Logs, counts and broadcasts the outcome of one read of --policy-file
// (`errors_before`: error_count() before it). Core 0 only.
void App::report_policy_file(bool installed, std::uint64_t errors_before) {
  if (installed) {
    ic::metrics::local().add_policy_reload(ic::metrics::PolicySource::kFile, true);
    const auto set = policy_file->current();
    ic::base::log(LogLevel::info, "policy accepted",
                  {{"source", "file"},
                   {"path", policy_file->path()},
                   {"policies", set->policy_count()},
                   {"quotas", set->quota_count()}});
    if (replicator) replicator->accepted_policy(set->source_json());
    broadcast_policies(set);
  } else if (policy_file->error_count() != errors_before) {
    // poll() only re-reads a changed file, so each failure is logged once.
    ic::metrics::local().add_policy_reload(ic::metrics::PolicySource::kFile, false);
    ic::base::log(LogLevel::warn, "policy rejected",
                  {{"source", "file"},
                   {"path", policy_file->path()},
                   {"error", policy_file->last_error()},
                   {"kept", "last good policy"}});
  }
}
// SIGHUP: re-read everything that comes from a file. Each part logs its own
// outcome; a bad file keeps the last good state.
void App::reload(std::string_view why) {
  ic::base::log(LogLevel::info, "reloading", {{"trigger", why}});
  reload_policy_file();
  reload_templates_file();
  reload_token_file();
  reload_tls(true);
}

void App::reload_policy_file() {
  if (!policy_file) return;
  // The store belongs to core 0: the reload runs there.
  const bool posted = runtime.post(0, [this] {
    const std::uint64_t errors = policy_file->error_count();
    report_policy_file(policy_file->load(), errors);
  });
  if (!posted) ic::base::log(LogLevel::warn, "policy reload not queued: core 0 mailbox full");
}

void App::reload_token_file() {
  if (config.control_token_file.empty()) return;
  ic::admin::force_token_reload();
  if (std::string problem = ic::admin::token_file_problem(config.control_token_file);
      !problem.empty()) {
    ic::base::log(LogLevel::warn, "control token rejected",
                  {{"path", config.control_token_file},
                   {"error", problem},
                   {"effect", "control requests answer 503 until the file is fixed"}});
  } else {
    ic::base::log(LogLevel::info, "control token reloaded", {{"path", config.control_token_file}});
  }
}

// `forced`: SIGHUP (re-read even if unchanged); else only when a file changed.
void App::reload_tls(bool forced) {
  if (!tls) return;
  std::string error;
  const auto outcome = forced ? tls->reload(&error) : tls->poll(&error);
  using Outcome = ic::net::TlsCertificateStore::Outcome;
  if (outcome == Outcome::kReloaded) {
    const auto ctx = tls->current();
    ic::base::log(LogLevel::info, "TLS certificate reloaded",
                  {{"path", tls->cert_file()},
                   {"subject", ctx->subject()},
                   {"not_after", ctx->not_after()},
                   {"trigger", forced ? "SIGHUP" : "file changed"}});
  } else if (outcome == Outcome::kFailed) {
    ic::base::log(
        LogLevel::warn, "TLS certificate rejected",
        {{"path", tls->cert_file()}, {"error", error}, {"kept", "last good certificate"}});
  }
}
}  // namespace ic::server
