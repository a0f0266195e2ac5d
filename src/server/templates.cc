// Prompt templates (server/app.hh, docs/templates.md): --templates-file at
// start, when it changes and on SIGHUP, the saved and replicated documents,
// and the broadcast that installs one set on every core.

#include "base/log.hh"
#include "runtime/map_reduce.hh"
#include "server/app.hh"
#include "templates/template_file.hh"

namespace ic::server {

using ic::base::LogLevel;

// Before the reactors start: the catalog, the render limits, --templates-file
// (a file that does not load is a bad flag value, exit 2).
bool App::load_templates() {
  templates = std::make_unique<ic::templates::Catalog>(runtime.cores());
  render_service.catalog = templates.get();
  render_service.models = &tokenizer_models;
  render_service.limits.max_rendered_bytes = prompt_text.max_prompt_bytes;
  if (config.templates_file.empty()) return true;
  templates_file = std::make_unique<ic::templates::TemplatesFile>(
      config.templates_file, static_cast<std::int32_t>(config.engine_block_size));
  ic::templates::TemplateParseResult parsed = templates_file->read();
  if (!parsed.ok()) {
    ic::base::log(LogLevel::error, "bad flag value",
                  {{"error", "--templates-file: " + parsed.error}});
    return false;
  }
  ic::base::log(
      LogLevel::info, "templates accepted",
      {{"source", "file"}, {"path", config.templates_file}, {"templates", parsed.set->size()}});
  install_templates_everywhere(std::move(parsed.set));
  return true;
}

// Before the reactors start (no core runs yet): every slot at once.
void App::install_templates_everywhere(std::shared_ptr<const ic::templates::TemplateSet> set) {
  templates->set_latest(set);
  for (unsigned core = 0; core < templates->cores(); ++core) templates->install_on_core(core, set);
}

// A document from the state file or a snapshot; --templates-file wins.
void App::install_saved_templates(const std::string& json, std::string_view source) {
  if (!config.templates_file.empty() || json.empty()) return;
  ic::templates::TemplateParseResult parsed = ic::templates::parse_templates_json(
      json, static_cast<std::int32_t>(config.engine_block_size));
  if (!parsed.ok()) {
    ic::base::log(LogLevel::warn, "templates rejected: kept the current ones",
                  {{"source", std::string(source)}, {"error", parsed.error}});
    return;
  }
  install_templates_everywhere(std::move(parsed.set));
}

// While serving: the latest set at once, then every core's slot on its core
// (a full mailbox retries from a timer: a change must not be lost).
void App::broadcast_templates(std::shared_ptr<const ic::templates::TemplateSet> set) {
  templates->set_latest(set);
  ic::templates::Catalog* catalog = templates.get();
  ic::runtime::invoke_on_all(
      runtime, [catalog, set](unsigned core) { catalog->install_on_core(core, set); },
      ic::runtime::Wait{.retry_us = 1000});
}

// Replication thread: another server's document. One this build rejects is
// logged and skipped (the servers that accepted it run a newer build).
void App::replicated_templates(std::uint64_t sequence, const std::string& json) {
  ic::templates::TemplateParseResult parsed = ic::templates::parse_templates_json(
      json, static_cast<std::int32_t>(config.engine_block_size));
  if (!parsed.ok()) {
    ic::base::log(LogLevel::warn, "replicated templates rejected: kept the current ones",
                  {{"stream_sequence", sequence}, {"error", parsed.error}});
    return;
  }
  ic::base::log(LogLevel::info, "templates accepted",
                {{"source", "replication"},
                 {"stream_sequence", sequence},
                 {"templates", parsed.set->size()}});
  broadcast_templates(std::move(parsed.set));
}

// SIGHUP: --templates-file again, changed or not. The file belongs to core 0:
// the read runs there.
void App::reload_templates_file() {
  if (!templates_file) return;
  const bool posted = runtime.post(0, [this] { report_templates_file(templates_file->read()); });
  if (!posted) ic::base::log(LogLevel::warn, "templates reload not queued: core 0 mailbox full");
}

// Core 0, every kPolicyPollUs (as --policy-file): a changed file is read.
void App::poll_templates_file() {
  if (std::optional<ic::templates::TemplateParseResult> parsed = templates_file->poll()) {
    report_templates_file(std::move(*parsed));
  }
  runtime.reactor(0).add_timer(kPolicyPollUs, [this] { poll_templates_file(); });
}

// Core 0: one read of --templates-file. A good document is replicated and
// installed everywhere; a bad one keeps the templates in force (each changed
// version is read, so logged, once).
void App::report_templates_file(ic::templates::TemplateParseResult parsed) {
  if (!parsed.ok()) {
    ic::base::log(LogLevel::warn, "templates rejected",
                  {{"source", "file"}, {"error", parsed.error}, {"kept", "last good templates"}});
    return;
  }
  ic::base::log(
      LogLevel::info, "templates accepted",
      {{"source", "file"}, {"path", config.templates_file}, {"templates", parsed.set->size()}});
  if (replicator) replicator->accepted_templates(parsed.set->source_json());
  broadcast_templates(std::move(parsed.set));
}

}  // namespace ic::server
