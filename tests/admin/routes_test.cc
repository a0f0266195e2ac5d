// The admin endpoints end to end on a real two-core runtime: sessions built by
// the factories main.cc uses, answers gathered across cores.
#include <doctest/doctest.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <initializer_list>
#include <memory>
#include <string>

#include "admin/server.hh"
#include "fakes.hh"
#include "metrics/registry.hh"
#include "runtime/runtime.hh"
#include "support/auth_metrics.hh"

using namespace ic;
using admin::testing::bytes_of;
using admin::testing::FakeConnection;

namespace {

// Concatenates pieces with append (GCC 12 -O3 flags operator+ chains with a
// false -Wrestrict).
std::string cat(std::initializer_list<std::string_view> pieces) {
  std::string out;
  for (std::string_view p : pieces) out.append(p);
  return out;
}

constexpr unsigned kCores = 2;

struct Harness {
  runtime::Runtime rt{
      runtime::Runtime::Options{.cores = kCores, .mailbox_depth = 64, .pin_threads = false}};
  metrics::Registry registry{kCores};
  admin::Readiness readiness{kCores};
  std::shared_ptr<admin::AdminContext> ctx = std::make_shared<admin::AdminContext>();
  std::array<std::shared_ptr<const config::PolicySet>, kCores> applied{};
  std::array<std::shared_ptr<const templates::TemplateSet>, kCores> templates_applied{};
  std::string token_path;

  Harness() {
    char tmpl[] = "/tmp/ic-routes-XXXXXX";
    token_path = cat({::mkdtemp(tmpl), "/token"});
    std::ofstream(token_path) << "tok\n";
    ctx->runtime = &rt;
    ctx->registry = &registry;
    ctx->readiness = &readiness;
    ctx->control_token_file = token_path;
    ctx->collect_snapshot = [](unsigned core) {
      index::ShardSnapshot s;
      s.tenants.push_back(index::TenantRow{.tenant_id = cat({"t", std::to_string(core)}),
                                           .index_entries = core + 1});
      s.total_prefixes = core + 1;
      return s;
    };
    ctx->apply_policy = [this](unsigned core, std::shared_ptr<const config::PolicySet> set) {
      applied.at(core) = std::move(set);  // each core writes only its own slot
    };
    ctx->current_policy = [this](unsigned core) {
      return applied.at(core) ? applied.at(core) : config::PolicySet::defaults();
    };
    ctx->apply_templates = [this](unsigned core,
                                  std::shared_ptr<const templates::TemplateSet> set) {
      templates_applied.at(core) = std::move(set);  // each core writes only its own slot
    };
    ctx->current_templates = [this] {
      return templates_applied.at(0) ? templates_applied.at(0) : templates::TemplateSet::empty();
    };
    for (unsigned core = 0; core < kCores; ++core) {
      registry.core(core).add_collector(
          [core](metrics::CoreMetrics& m) { m.set_index_entries("llama", 10 + core); });
    }
    rt.start([this](unsigned core) {
      registry.bind_current_thread(core);
      heartbeat();
    });
  }
  ~Harness() {
    // Let every core finish the deferred session teardown of the last
    // exchange before stopping (deferred tasks run FIFO on the next turn).
    for (unsigned core = 0; core < kCores; ++core) {
      std::promise<void> drained;
      if (rt.post(core, [&drained]() {
            runtime::current_reactor().defer([&drained]() { drained.set_value(); });
          })) {
        drained.get_future().wait();
      }
    }
    rt.stop();
    rt.join();
    std::remove(token_path.c_str());
    ::rmdir(token_path.substr(0, token_path.rfind('/')).c_str());
  }

  // Keeps every reactor turning each millisecond. Works around a lost
  // cross-core wake in the runtime (reported to its owner with a repro:
  // a post that lands after drain_mailboxes() can sleep until the next
  // event); without it a gather may wait out its 2 s deadline.
  static void heartbeat() {
    runtime::current_reactor().add_timer(1000, []() { heartbeat(); });
  }

  // Opens a session on `core` through the listener's factory, sends `bytes`
  // (which must end with a "Connection: close" request) and returns all the
  // bytes answered once the session closes the connection.
  std::string exchange(unsigned core, bool control, std::string bytes) {
    struct Box {
      FakeConnection conn;
      std::unique_ptr<net::Session> session;
      std::promise<std::string> done;
    };
    auto box = std::make_shared<Box>();
    auto factory = control ? admin::make_control_session_factory(ctx)
                           : admin::make_public_session_factory(ctx);
    std::future<std::string> answer = box->done.get_future();
    const bool posted = rt.post(core, [box, factory, core, bytes = std::move(bytes)]() {
      box->conn.core_index = core;
      box->conn.on_request_flush = [box]() {
        runtime::current_reactor().defer([box]() {
          if (box->session) box->session->flush();
        });
      };
      box->conn.on_close = [box]() {
        box->done.set_value(box->conn.out);
        runtime::current_reactor().defer([box]() {
          box->session->on_close();
          box->session.reset();
          // Break the box → callback → box cycle.
          box->conn.on_close = nullptr;
          box->conn.on_request_flush = nullptr;
        });
      };
      box->session = factory(box->conn);
      box->session->on_data(bytes_of(bytes));
    });
    REQUIRE(posted);
    REQUIRE(answer.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    return answer.get();
  }
};

std::string get(std::string_view path, std::string_view extra = "") {
  return cat({"GET ", path, " HTTP/1.1\r\nHost: t\r\n", extra, "Connection: close\r\n\r\n"});
}

std::string send_body(std::string_view method, std::string_view path, std::string_view body,
                      std::string_view extra = "") {
  const std::string length = std::to_string(body.size());
  return cat({method, " ", path, " HTTP/1.1\r\nHost: t\r\n", extra, "Content-Length: ", length,
              "\r\nConnection: close\r\n\r\n", body});
}

std::string text(int status, std::string_view reason, std::string_view body,
                 std::string_view extra = "") {
  const std::string code = std::to_string(status);
  const std::string length = std::to_string(body.size());
  return cat({"HTTP/1.1 ", code, " ", reason,
              "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ", length, "\r\n",
              extra, "Connection: close\r\n\r\n", body});
}

std::string status_line(const std::string& response) {
  return response.substr(0, response.find("\r\n"));
}

// A response up to and including the blank line that ends its header section.
std::string header_section(const std::string& response) {
  return response.substr(0, response.find("\r\n\r\n") + 4);
}

}  // namespace

TEST_CASE("public listener: healthz, readyz before/after every core serves, draining, 404, 405") {
  Harness h;
  CHECK(h.exchange(0, false, get("/healthz")) == text(200, "OK", "ok"));
  CHECK(h.exchange(1, false, get("/readyz")) == text(503, "Service Unavailable", "not ready"));
  h.readiness.core_serving(0);
  CHECK(h.exchange(1, false, get("/readyz")) == text(503, "Service Unavailable", "not ready"));
  h.readiness.core_serving(1);
  CHECK(h.exchange(1, false, get("/readyz")) == text(200, "OK", "ok"));
  h.readiness.set_draining();
  CHECK(h.exchange(0, false, get("/readyz")) == text(503, "Service Unavailable", "draining"));
  CHECK(h.exchange(0, false, get("/healthz")) == text(200, "OK", "ok"));
  CHECK(h.exchange(0, false, get("/nope")) == text(404, "Not Found", "not found"));
  CHECK(h.exchange(0, false, get("/snapshot")) == text(404, "Not Found", "not found"));
  CHECK(h.exchange(0, false, send_body("POST", "/metrics", "")) ==
        text(405, "Method Not Allowed", "method not allowed", "Allow: GET, HEAD\r\n"));
}

TEST_CASE("HEAD answers as GET without the body (RFC 9110 section 9.3.2)") {
  Harness h;
  const auto head = [](std::string_view path, std::string_view extra = "") {
    return cat({"HEAD ", path, " HTTP/1.1\r\nHost: t\r\n", extra, "Connection: close\r\n\r\n"});
  };
  // GET's header section, Content-Length included ("Content-Length: 2" for "ok"), no body.
  CHECK(h.exchange(0, false, head("/healthz")) == header_section(text(200, "OK", "ok")));
  CHECK(h.exchange(1, false, head("/readyz")) ==
        header_section(text(503, "Service Unavailable", "not ready")));
  const std::string metrics = h.exchange(0, false, head("/metrics"));
  CHECK(status_line(metrics) == "HTTP/1.1 200 OK");
  CHECK(metrics == header_section(metrics));
  const std::string auth = "Authorization: Bearer tok\r\n";
  CHECK(h.exchange(1, true, head("/snapshot", auth)) ==
        header_section(h.exchange(1, true, get("/snapshot", auth))));
  CHECK(h.exchange(0, true, head("/snapshot")) ==
        header_section(h.exchange(0, true, get("/snapshot"))));
  CHECK(h.exchange(0, true, head("/policy", auth)) ==
        header_section(h.exchange(0, true, get("/policy", auth))));
}

TEST_CASE("/metrics sums every core's registry") {
  Harness h;
  // Record on each core's own thread, as the service layer does.
  for (unsigned core = 0; core < kCores; ++core) {
    std::promise<void> recorded;
    REQUIRE(h.rt.post(core, [&recorded]() {
      metrics::local().record_lookup("llama", "PREFIX_MATCH", true, 20);
      recorded.set_value();
    }));
    recorded.get_future().wait();
  }
  const std::string out = h.exchange(1, false, get("/metrics"));
  CHECK(status_line(out) == "HTTP/1.1 200 OK");
  CHECK(out.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n") !=
        std::string::npos);
  CHECK(out.find("\ninferencecache_lookup_route_calls_total{model=\"llama\",reason_code=\"PREFIX_"
                 "MATCH\",hint_used=\"true\"} 2\n") != std::string::npos);
  CHECK(out.find("\ninferencecache_index_entries{model=\"llama\"} 21\n") != std::string::npos);
  CHECK(out.find("\ninferencecache_core_lookup_route_calls_total{core=\"0\"} 1\n"
                 "inferencecache_core_lookup_route_calls_total{core=\"1\"} 1\n") !=
        std::string::npos);
}

TEST_CASE("/snapshot: auth outcomes, then the merged JSON") {
  Harness h;
  CHECK(h.exchange(0, true, get("/snapshot")) ==
        text(401, "Unauthorized", "missing Authorization header",
             "WWW-Authenticate: Bearer realm=\"inferencecache\"\r\n"));
  CHECK(h.exchange(0, true, get("/snapshot", "Authorization: Bearer nope\r\n")) ==
        text(403, "Forbidden", "invalid bearer token"));
  CHECK(h.exchange(1, true, send_body("POST", "/snapshot", "", "Authorization: Bearer tok\r\n")) ==
        text(405, "Method Not Allowed", "method not allowed", "Allow: GET, HEAD\r\n"));
  const std::string body =
      R"({"replicas":[],"tenants":[{"tenantId":"t0","indexEntries":1,"hitRate":0,)"
      R"("hitRateReported":false,"memoryUsed":0},{"tenantId":"t1","indexEntries":2,"hitRate":0,)"
      R"("hitRateReported":false,"memoryUsed":0}],"totalPrefixes":3,"hotPrefixes":0,"routing":[]})"
      "\n";
  CHECK(h.exchange(1, true, get("/snapshot", "Authorization: Bearer tok\r\n")) ==
        cat({"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ",
             std::to_string(body.size()), "\r\nConnection: close\r\n\r\n", body}));
  CHECK(h.exchange(0, true, get("/other", "Authorization: Bearer tok\r\n")) ==
        text(404, "Not Found", "not found"));
  const std::string metrics = h.exchange(0, false, get("/metrics"));
  CHECK(metrics.find(ic::test::auth_total_lines("snapshot", 1, 1, 1, 0)) != std::string::npos);
}

TEST_CASE("/policy: 204 installs the set on every core; 400 with a reason; 405; auth") {
  Harness h;
  const std::string auth = "Authorization: Bearer tok\r\n";
  const std::string good =
      R"({"version":7,"policies":[{"namespace":"team-a","routingFloorScore":0}],)"
      R"("tenants":[{"tenantID":"tenant-a","maxIndexEntries":10}]})";
  CHECK(h.exchange(1, true, send_body("POST", "/policy", good, auth)) ==
        "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
  for (unsigned core = 0; core < kCores; ++core) {
    std::promise<std::shared_ptr<const config::PolicySet>> seen;
    REQUIRE(h.rt.post(core, [&h, &seen, core]() { seen.set_value(h.applied[core]); }));
    auto set = seen.get_future().get();
    REQUIRE(set != nullptr);
    CHECK(set->policy_for("team-a").routing_floor_score == 0.0);
    CHECK(set->policy_for("team-b").routing_floor_score == 0.1);
    REQUIRE(set->quota_for("tenant-a") != nullptr);
    CHECK(set->quota_for("tenant-a")->max_index_entries == 10);
  }
  CHECK(status_line(h.exchange(0, true, send_body("PUT", "/policy", R"({"version":3})", auth))) ==
        "HTTP/1.1 204 No Content");

  const std::string bad_version =
      h.exchange(0, true, send_body("POST", "/policy", R"({"version":8})", auth));
  CHECK(status_line(bad_version) == "HTTP/1.1 400 Bad Request");
  const std::string unknown =
      h.exchange(0, true, send_body("POST", "/policy", R"({"version":7,"bogus":1})", auth));
  CHECK(status_line(unknown) == "HTTP/1.1 400 Bad Request");
  CHECK(unknown.find("bogus") != std::string::npos);
  CHECK(
      status_line(h.exchange(0, true, send_body("POST", "/policy", R"({"version":7} x)", auth))) ==
      "HTTP/1.1 400 Bad Request");
  CHECK(h.exchange(0, true, send_body("DELETE", "/policy", "", auth)) ==
        text(405, "Method Not Allowed", "method not allowed", "Allow: GET, HEAD, POST, PUT\r\n"));
  CHECK(status_line(h.exchange(0, true,
                               send_body("POST", "/policy", good, "Authorization: Basic x\r\n"))) ==
        "HTTP/1.1 401 Unauthorized");
  CHECK(status_line(h.exchange(
            0, true, send_body("POST", "/policy", good, "Authorization: Bearer x\r\n"))) ==
        "HTTP/1.1 403 Forbidden");
  std::remove(h.token_path.c_str());
  CHECK(h.exchange(0, true, send_body("POST", "/policy", good, auth)) ==
        text(503, "Service Unavailable", "control token file unreadable or empty"));

  const std::string metrics = h.exchange(1, false, get("/metrics"));
  CHECK(metrics.find(ic::test::auth_total_lines("policy", 5, 1, 1, 1)) != std::string::npos);
  CHECK(metrics.find("inferencecache_policy_reloads_total{source=\"http\",result=\"ok\"} 2\n"
                     "inferencecache_policy_reloads_total{source=\"http\",result=\"error\"} 3\n") !=
        std::string::npos);
}

TEST_CASE("/templates: 204 installs the set on every core; GET; 400 with a reason; 405; auth") {
  Harness h;
  const std::string auth = "Authorization: Bearer tok\r\n";
  const auto json = [](std::string_view body) {
    return cat({"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ",
                std::to_string(body.size()), "\r\nConnection: close\r\n\r\n", body});
  };
  CHECK(h.exchange(0, true, get("/templates", auth)) == json("{\"version\":1,\"templates\":[]}\n"));
  const std::string good =
      R"({"version":1,"templates":[{"tenantID":"team-a","name":"agent","model":"m",)"
      R"("source":"Hi {{ who }}","variables":[{"name":"who","stability":"volatile"}]}]})";
  CHECK(h.exchange(1, true, send_body("POST", "/templates", good, auth)) ==
        "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
  for (unsigned core = 0; core < kCores; ++core) {
    std::promise<std::shared_ptr<const templates::TemplateSet>> seen;
    REQUIRE(h.rt.post(core, [&h, &seen, core]() { seen.set_value(h.templates_applied[core]); }));
    auto set = seen.get_future().get();
    REQUIRE(set != nullptr);
    REQUIRE(set->find("team-a", "agent") != nullptr);
    CHECK(set->find("team-a", "agent")->block_size == 16);  // AdminContext::default_block_size
  }
  CHECK(h.exchange(0, true, get("/templates", auth)) == json(good + "\n"));
  const std::string bad = h.exchange(
      0, true, send_body("PUT", "/templates", R"({"version":1,"templates":[{"name":"x"}]})", auth));
  CHECK(bad == text(400, "Bad Request", "templates[0]: missing \"tenantID\""));
  CHECK(h.exchange(0, true, send_body("DELETE", "/templates", "", auth)) ==
        text(405, "Method Not Allowed", "method not allowed", "Allow: GET, HEAD, POST, PUT\r\n"));
  CHECK(status_line(h.exchange(
            0, true, send_body("POST", "/templates", good, "Authorization: Bearer x\r\n"))) ==
        "HTTP/1.1 403 Forbidden");
  CHECK(status_line(h.exchange(0, true, get("/templates"))) == "HTTP/1.1 401 Unauthorized");
}

TEST_CASE("GET /policy: the document in force on the core, the defaults before any push") {
  Harness h;
  const std::string auth = "Authorization: Bearer tok\r\n";
  const auto json = [](std::string_view body) {
    return cat({"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ",
                std::to_string(body.size()), "\r\nConnection: close\r\n\r\n", body});
  };
  CHECK(h.exchange(0, true, get("/policy", auth)) ==
        json("{\"version\":7,\"policies\":[],\"tenants\":[]}\n"));
  const std::string pushed =
      R"({"version":7,"policies":[{"namespace":"team-a","affinityRouting":false}]})";
  REQUIRE(status_line(h.exchange(1, true, send_body("PUT", "/policy", pushed, auth))) ==
          "HTTP/1.1 204 No Content");
  CHECK(h.exchange(0, true, get("/policy", auth)) == json(pushed + "\n"));
  CHECK(h.exchange(1, true, get("/policy", auth)) == json(pushed + "\n"));
  CHECK(status_line(h.exchange(1, true, get("/policy"))) == "HTTP/1.1 401 Unauthorized");
  CHECK(status_line(h.exchange(1, true, get("/policy", "Authorization: Bearer x\r\n"))) ==
        "HTTP/1.1 403 Forbidden");
}

TEST_CASE("--insecure-disable-auth serves the control listener without a token") {
  Harness h;
  h.ctx->insecure_disable_auth = true;
  CHECK(status_line(h.exchange(0, true, get("/snapshot"))) == "HTTP/1.1 200 OK");
}

TEST_CASE("a scrape that misses a core fails with 503 instead of showing a counter reset") {
  Harness h;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  // Core 1 is stuck in a task until the answer has arrived (2 s gather deadline).
  std::promise<void> blocked;
  REQUIRE(h.rt.post(1, [released, &blocked]() {
    blocked.set_value();
    released.wait();
  }));
  blocked.get_future().wait();
  const std::string out = h.exchange(0, false, get("/metrics"));
  release.set_value();
  CHECK(out == text(503, "Service Unavailable", "metrics incomplete: a core did not answer"));
}
