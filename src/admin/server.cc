#include "admin/server.hh"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "admin/auth.hh"
#include "admin/snapshot_json.hh"
#include "base/log.hh"
#include "metrics/prometheus.hh"
#include "metrics/scrape.hh"
#include "runtime/map_reduce.hh"

namespace ic::admin {

namespace {

constexpr std::string_view kJsonContentType = "application/json";
// GET /policy before any policy arrived: the defaults, as a document PUT accepts.
constexpr std::string_view kDefaultPolicyJson = R"({"version":7,"policies":[],"tenants":[]})";
// GET /templates before any template arrived: the empty document.
constexpr std::string_view kEmptyTemplatesJson = R"({"version":1,"templates":[]})";
// At most one "control request refused" line per 10 s across all cores; the
// rest are counted into the next line (and always in *_auth_total).
constexpr std::int64_t kAuthLogIntervalUs = 10'000'000;
base::LogRateLimit g_auth_log_limit(kAuthLogIntervalUs);

void log_policy_rejected(std::string_view why) {
  base::log(base::LogLevel::warn, "policy rejected", {{"source", "http"}, {"error", why}});
}

HttpResponse not_found() { return HttpResponse::text(404, "not found"); }

// GET's endpoints answer HEAD alike; the session leaves the body out.
bool is_get(const HttpRequest& request) {
  return request.method == "GET" || request.method == "HEAD";
}

void serve_metrics(const AdminContext& ctx, const Responder& respond) {
  metrics::scrape(*ctx.runtime, *ctx.registry, [respond](std::optional<std::string> body) {
    if (!body) {
      respond(HttpResponse::text(503, "metrics incomplete: a core did not answer"));
      return;
    }
    HttpResponse r;
    r.content_type = std::string(metrics::kPrometheusContentType);
    r.body = std::move(*body);
    respond(std::move(r));
  });
}

void serve_snapshot(const AdminContext& ctx, const Responder& respond) {
  if (!ctx.collect_snapshot) {
    respond(HttpResponse::text(503, "snapshot not available"));
    return;
  }
  runtime::map_reduce<index::ShardSnapshot>(
      *ctx.runtime, ctx.collect_snapshot,
      [respond](std::vector<std::optional<index::ShardSnapshot>> shards) {
        for (const auto& shard : shards) {
          if (!shard) {
            respond(HttpResponse::text(503, "snapshot incomplete: a core did not answer"));
            return;
          }
        }
        HttpResponse r;
        r.content_type = std::string(kJsonContentType);
        r.body = render_snapshot_json(merge_snapshots(shards));
        r.body += '\n';  // a shell prompt after `curl /snapshot` starts on its own line
        respond(std::move(r));
      });
}

// GET /policy: the document in force on this core (docs/policy.md "Reading it back").
void serve_policy_in_force(const AdminContext& ctx, const Responder& respond) {
  if (!ctx.current_policy) {
    respond(HttpResponse::text(503, "policy store not available"));
    return;
  }
  const std::shared_ptr<const config::PolicySet> set = ctx.current_policy(runtime::current_core());
  HttpResponse r;
  r.content_type = std::string(kJsonContentType);
  r.body = set == nullptr || set->source_json().empty() ? std::string(kDefaultPolicyJson)
                                                        : set->source_json();
  if (r.body.empty() || r.body.back() != '\n') r.body += '\n';
  respond(std::move(r));
}

// Installs the same immutable `set` on every core (`apply(core, set)` runs on
// that core) and calls `done(true)` once all have, `done(false)` when one
// could not be reached: the control listener answers 204 only then, so a
// caller's next call sees the new set whatever core serves it.
template <class Apply, class Set>
void install_on_every_core(runtime::Runtime& rt, Apply apply, std::shared_ptr<const Set> set,
                           std::function<void(bool everywhere)> done) {
  runtime::map_reduce<bool>(
      rt,
      [apply, set](unsigned core) {
        apply(core, set);
        return true;
      },
      [done](std::vector<std::optional<bool>> applied) {
        done(std::all_of(applied.begin(), applied.end(),
                         [](const std::optional<bool>& core) { return core.has_value(); }));
      });
}

HttpResponse no_content() {
  HttpResponse r;
  r.status = 204;
  return r;
}

void serve_policy(const AdminContext& ctx, const HttpRequest& request, const Responder& respond) {
  config::PolicyParseResult parsed = config::parse_policy_json(request.body);
  if (!parsed.ok()) {
    metrics::local().add_policy_reload(metrics::PolicySource::kHttp, false);
    log_policy_rejected(parsed.error);
    respond(HttpResponse::text(400, parsed.error));
    return;
  }
  if (!ctx.apply_policy) {
    respond(HttpResponse::text(503, "policy store not available"));
    return;
  }
  // Every core installs the same immutable set; 204 only once all have, so a
  // caller's next LookupRoute sees it whatever core serves it.
  std::shared_ptr<const config::PolicySet> set = std::move(parsed.set);
  install_on_every_core(*ctx.runtime, ctx.apply_policy, set, [respond, set](bool everywhere) {
    if (!everywhere) {
      metrics::local().add_policy_reload(metrics::PolicySource::kHttp, false);
      log_policy_rejected("not applied on every core");
      respond(HttpResponse::text(503, "policy not applied on every core; retry"));
      return;
    }
    metrics::local().add_policy_reload(metrics::PolicySource::kHttp, true);
    base::log(
        base::LogLevel::info, "policy accepted",
        {{"source", "http"}, {"policies", set->policy_count()}, {"quotas", set->quota_count()}});
    respond(no_content());
  });
}

// GET /templates: the document in force (docs/templates.md "Two ways in").
void serve_templates_in_force(const AdminContext& ctx, const Responder& respond) {
  if (!ctx.current_templates) {
    respond(HttpResponse::text(503, "template store not available"));
    return;
  }
  const std::shared_ptr<const templates::TemplateSet> set = ctx.current_templates();
  HttpResponse r;
  r.content_type = std::string(kJsonContentType);
  r.body = set == nullptr || set->source_json().empty() ? std::string(kEmptyTemplatesJson)
                                                        : set->source_json();
  if (r.body.empty() || r.body.back() != '\n') r.body += '\n';
  respond(std::move(r));
}

// POST|PUT /templates: parse, install on every core, 204 once all have (a
// caller's next RenderTemplate sees it whatever core serves it).
void serve_templates(const AdminContext& ctx, const HttpRequest& request,
                     const Responder& respond) {
  templates::TemplateParseResult parsed =
      templates::parse_templates_json(request.body, ctx.default_block_size);
  if (!parsed.ok()) {
    base::log(base::LogLevel::warn, "templates rejected",
              {{"source", "http"}, {"error", parsed.error}});
    respond(HttpResponse::text(400, parsed.error));
    return;
  }
  if (!ctx.apply_templates) {
    respond(HttpResponse::text(503, "template store not available"));
    return;
  }
  std::shared_ptr<const templates::TemplateSet> set = std::move(parsed.set);
  install_on_every_core(*ctx.runtime, ctx.apply_templates, set, [respond, set](bool everywhere) {
    if (!everywhere) {
      base::log(base::LogLevel::warn, "templates rejected",
                {{"source", "http"}, {"error", "not applied on every core"}});
      respond(HttpResponse::text(503, "templates not applied on every core; retry"));
      return;
    }
    base::log(base::LogLevel::info, "templates accepted",
              {{"source", "http"}, {"templates", set->size()}});
    respond(no_content());
  });
}

// Runs the bearer check for `endpoint`, counts it, answers refusals.
bool authorized(TokenAuth& auth, metrics::AuthEndpoint endpoint, const HttpRequest& request,
                const Responder& respond) {
  const AuthDecision decision = auth.check(request.header("authorization"));
  metrics::local().add_auth(endpoint, decision.result);
  if (decision.result == metrics::AuthResult::kOk) return true;
  std::uint64_t suppressed = 0;
  if (g_auth_log_limit.allow(base::log_clock_us(), &suppressed)) {
    base::log(base::LogLevel::warn, "control request refused",
              {{"path", request.path()},
               {"status", decision.status},
               {"reason", decision.reason},
               {"suppressed", suppressed}});
  }
  HttpResponse r = HttpResponse::text(decision.status, decision.reason);
  if (decision.status == 401) {
    r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"inferencecache\"");
  }
  respond(std::move(r));
  return false;
}

}  // namespace

HttpHandler make_public_handler(std::shared_ptr<const AdminContext> ctx) {
  return [ctx](HttpRequest& request, Responder respond) {
    const std::string_view path = request.path();
    if (path != "/healthz" && path != "/readyz" && path != "/metrics") {
      respond(not_found());
    } else if (!is_get(request)) {
      respond(HttpResponse::method_not_allowed("GET, HEAD"));
    } else if (path == "/healthz") {
      respond(HttpResponse::text(200, "ok"));
    } else if (path == "/readyz") {
      // Draining (SIGTERM) is told apart from starting: a load balancer
      // treats both the same, an operator reading the probe should not.
      const bool ready = ctx->readiness == nullptr || ctx->readiness->ready();
      const bool draining = ctx->readiness != nullptr && ctx->readiness->draining();
      std::string body = ready ? "ok" : draining ? "draining" : "not ready";
      if (ctx->readiness_detail) {
        const std::string detail = ctx->readiness_detail();
        if (!detail.empty()) body.append("\n").append(detail);
      }
      respond(HttpResponse::text(ready ? 200 : 503, body));
    } else {
      serve_metrics(*ctx, respond);
    }
  };
}

HttpHandler make_control_handler(std::shared_ptr<const AdminContext> ctx, TokenAuth& auth) {
  return [ctx, &auth](HttpRequest& request, Responder respond) {
    const std::string_view path = request.path();
    if (path == "/snapshot") {
      if (!is_get(request)) {
        respond(HttpResponse::method_not_allowed("GET, HEAD"));
      } else if (authorized(auth, metrics::AuthEndpoint::kSnapshot, request, respond)) {
        serve_snapshot(*ctx, respond);
      }
    } else if (path == "/policy") {
      const bool read = is_get(request);
      if (!read && request.method != "POST" && request.method != "PUT") {
        respond(HttpResponse::method_not_allowed("GET, HEAD, POST, PUT"));
      } else if (authorized(auth, metrics::AuthEndpoint::kPolicy, request, respond)) {
        if (read) {
          serve_policy_in_force(*ctx, respond);
        } else {
          serve_policy(*ctx, request, respond);
        }
      }
    } else if (path == "/templates") {
      const bool read = is_get(request);
      if (!read && request.method != "POST" && request.method != "PUT") {
        respond(HttpResponse::method_not_allowed("GET, HEAD, POST, PUT"));
      } else if (authorized(auth, metrics::AuthEndpoint::kPolicy, request, respond)) {
        // The same bearer check as /policy, counted with it.
        if (read) {
          serve_templates_in_force(*ctx, respond);
        } else {
          serve_templates(*ctx, request, respond);
        }
      }
    } else {
      respond(not_found());
    }
  };
}

net::SessionFactory make_public_session_factory(std::shared_ptr<const AdminContext> ctx) {
  HttpHandler handler = make_public_handler(ctx);
  return [ctx, handler](net::Connection& connection) -> std::unique_ptr<net::Session> {
    return std::make_unique<HttpSession>(connection, handler, reactor_timers(), ctx->session);
  };
}

net::SessionFactory make_control_session_factory(std::shared_ptr<const AdminContext> ctx) {
  // One TokenAuth per core: each is touched only by its own core's sessions.
  auto auths = std::make_shared<std::vector<std::unique_ptr<TokenAuth>>>();
  const unsigned cores = ctx->runtime != nullptr ? ctx->runtime->cores() : 1;
  for (unsigned core = 0; core < cores; ++core) {
    auths->push_back(
        std::make_unique<TokenAuth>(ctx->control_token_file, ctx->insecure_disable_auth));
  }
  return [ctx, auths](net::Connection& connection) -> std::unique_ptr<net::Session> {
    TokenAuth& auth = *auths->at(connection.core() % auths->size());
    HttpHandler inner = make_control_handler(ctx, auth);
    // The handler keeps the per-core TokenAuth table alive with it.
    HttpHandler handler = [auths, inner = std::move(inner)](HttpRequest& r, Responder respond) {
      inner(r, std::move(respond));
    };
    return std::make_unique<HttpSession>(connection, std::move(handler), reactor_timers(),
                                         ctx->session);
  };
}

}  // namespace ic::admin
