#pragma once
// The admin listeners for the composition root (src/main.cc):
//
//   auto ctx = std::make_shared<ic::admin::AdminContext>();
//   ctx->runtime = &runtime; ctx->registry = &registry; ctx->readiness = &readiness;
//   ctx->collect_snapshot = [&](unsigned core) { return shards[core]->collect_snapshot(); };
//   ctx->apply_policy = [&](unsigned core, auto set) { shards[core]->set_policies(set); };
//   ctx->control_token_file = cfg.control_token_file;
//   ctx->insecure_disable_auth = cfg.insecure_disable_auth;
//   server.add_listener({.name = "http", .address = cfg.http_bind_address,
//                        .factory = ic::admin::make_public_session_factory(ctx)});
//   server.add_listener({.name = "snapshot", .address = cfg.snapshot_bind_address,
//                        .factory = ic::admin::make_control_session_factory(ctx)});
//
// Public listener (:8080): GET /healthz → 200 "ok"; GET /readyz → 200 "ok" /
// 503 "not ready" (starting) / 503 "draining" (SIGTERM grace); GET /metrics → Prometheus text
// 0.0.4. Control listener
// (:8081): GET /snapshot (JSON, newline-terminated), GET /policy (the document in force),
// POST|PUT /policy (docs/policy.md) → 204 / 400, GET /templates (the template document in force),
// POST|PUT /templates (docs/templates.md) → 204 / 400. HEAD answers as GET without the body.
// Unknown path 404; wrong method 405 with Allow. Control requests need
// "Authorization: Bearer <token>" (401 missing/not Bearer, 403 wrong token,
// 503 token file unreadable) unless insecure_disable_auth.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "admin/http_session.hh"
#include "admin/readiness.hh"
#include "config/policy.hh"
#include "index/snapshot.hh"
#include "metrics/registry.hh"
#include "net/session.hh"
#include "runtime/runtime.hh"
#include "templates/template_set.hh"

namespace ic::admin {

// Everything the admin endpoints reach. Filled before the runtime starts,
// read-only afterwards (shared by every core's sessions).
struct AdminContext {
  runtime::Runtime* runtime = nullptr;    // cross-core gather (scrape, snapshot, policy)
  metrics::Registry* registry = nullptr;  // /metrics
  Readiness* readiness = nullptr;         // /readyz (nullptr: always ready)
  // Any thread: extra /readyz lines after "ok" / "not ready" (replication
  // state, docs/replication.md "Readiness"); empty function or "" = none.
  std::function<std::string()> readiness_detail;
  // Runs ON `core`: that core's index shard rows for /snapshot.
  std::function<index::ShardSnapshot(unsigned core)> collect_snapshot;
  // Runs ON `core`: make `policies` that core's policy from its next call.
  std::function<void(unsigned core, std::shared_ptr<const config::PolicySet> policies)>
      apply_policy;
  // Runs ON `core`: the policy set that core's next call uses (GET /policy).
  std::function<std::shared_ptr<const config::PolicySet>(unsigned core)> current_policy;
  // Runs ON `core`: make `set` that core's prompt templates from its next
  // RenderTemplate (docs/templates.md).
  std::function<void(unsigned core, std::shared_ptr<const templates::TemplateSet> set)>
      apply_templates;
  // Any thread: the template set in force (GET /templates).
  std::function<std::shared_ptr<const templates::TemplateSet>()> current_templates;
  // --engine-block-size: the block size of a template that gives none (tokens).
  std::int32_t default_block_size = 16;
  // Bearer token file of the control listener; re-read when it changes.
  std::string control_token_file;
  bool insecure_disable_auth = false;
  // Parser limits and timeouts of both listeners.
  HttpSessionOptions session;
};

// Session factories for net::ListenerOptions::factory. Call them on the
// connection's core (the net layer does). `ctx` must be complete.
net::SessionFactory make_public_session_factory(std::shared_ptr<const AdminContext> ctx);
net::SessionFactory make_control_session_factory(std::shared_ptr<const AdminContext> ctx);

// The request handlers behind the factories (for tests). The control handler
// uses `auth`, which must belong to the calling core.
HttpHandler make_public_handler(std::shared_ptr<const AdminContext> ctx);
class TokenAuth;
HttpHandler make_control_handler(std::shared_ptr<const AdminContext> ctx, TokenAuth& auth);

}  // namespace ic::admin
