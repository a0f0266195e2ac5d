#pragma once
// What the replication integration tests share (docs/replication.md): a
// temp directory, a server of the replicated group, a workload over many
// tenants with its probes, and polling with a generous deadline.
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../admin/http_client.hh"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "support/builders.hh"
#include "support/grpc_channel.hh"
#include "support/server_process.hh"
#include "support/temp_dir.hh"

namespace ic::rtest {

namespace pb = ::inferencecache::v1alpha1;
using ic::itest::deadline_in;
using namespace std::chrono_literals;

constexpr auto kConverge = 60s;  // generous: a loaded 2-core machine

// An hour from now (µs): no TTL expires what a test reports.
inline std::int64_t future_us() { return ic::test::hour_from_now_us(); }
using ic::test::block_hash;

// A private temp directory (support/temp_dir.hh) named for these tests.
struct TempDir : ic::test::TempDir {
  TempDir() : ic::test::TempDir("ic-repl") {}
};

// A server of the replicated group (2 cores, reference ranking so answers
// do not depend on each server's own lookup load; see docs/replication.md).
struct Served {
  ic::itest::ServerProcess server;
  std::shared_ptr<grpc::Channel> channel = ic::itest::insecure_channel(server.grpc_port());
  std::unique_ptr<pb::InferenceCache::Stub> stub = pb::InferenceCache::NewStub(channel);

  Served(const std::string& nats_url, const std::string& state_file,
         std::vector<std::string> more_args = {}, std::string ready_when_logged = {})
      : server(options(nats_url, state_file, std::move(more_args), std::move(ready_when_logged))) {}
  static ic::itest::ServerOptions options(const std::string& nats_url,
                                          const std::string& state_file,
                                          std::vector<std::string> more_args,
                                          std::string ready_when_logged) {
    ic::itest::ServerOptions o;
    o.ready_when_logged = std::move(ready_when_logged);
    o.extra_args = {"--threads",  "2",     "--insecure-disable-auth", "--ranking", "reference",
                    "--nats-url", nats_url};
    o.extra_args.insert(o.extra_args.end(), more_args.begin(), more_args.end());
    if (!state_file.empty()) {
      o.extra_args.insert(o.extra_args.end(),
                          {"--state-file", state_file, "--state-save-interval", "200ms"});
    }
    return o;
  }

  grpc::Status report(const std::vector<pb::CacheStateUpdate>& updates) {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(20s));
    pb::Ack ack;
    auto writer = stub->ReportCacheState(&ctx, &ack);
    for (const auto& u : updates) {
      if (!writer->Write(u)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }
  // ALL_CLEARED for replica r-a of (tenant, "m").
  void clear_replica(const std::string& tenant) {
    pb::CacheEvent ev;
    ev.set_type(pb::CacheEvent::ALL_CLEARED);
    ev.set_tenant_id(tenant);
    ev.set_model_id("m");
    ev.set_replica_id("r-a");
    ev.set_timestamp_us(future_us());
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(10s));
    pb::Ack ack;
    const grpc::Status st = stub->PublishEvent(&ctx, ev, &ack);
    REQUIRE_MESSAGE(st.ok(), st.error_message());
  }
  // The answer as comparable text (itest::lookup_text).
  std::string lookup(const pb::LookupRouteRequest& r) { return ic::itest::lookup_text(*stub, r); }
  std::string metrics() {
    return ic::itest::http_request(server.http_port(), "GET", "/metrics").body;
  }
  // The value of an unlabelled metric line `name` (-1 when absent).
  double metric(const std::string& name) {
    const std::string m = metrics();
    const std::string key = "\n" + name + " ";
    const auto at = m.find(key);
    return at == std::string::npos ? -1 : std::stod(m.substr(at + key.size()));
  }
};

inline std::string tenant_name(int i) { return "tenant-" + std::to_string(i); }

// The two-replica workload and its probes (tests/support/builders.hh).
inline std::vector<pb::CacheStateUpdate> workload(int first, int count, std::int64_t ts) {
  return ic::test::two_replica_workload(first, count, ts);
}
inline std::vector<pb::LookupRouteRequest> probes(int tenants) {
  return ic::test::two_replica_probes(tenants);
}

// Stops every server (SIGTERM); each must exit 0.
inline void stop_all(std::initializer_list<Served*> servers) {
  for (Served* s : servers) CHECK(s->server.stop() == 0);
}

inline std::vector<std::string> answers(Served& s, int tenants) {
  std::vector<std::string> out;
  for (const auto& p : probes(tenants)) out.push_back(s.lookup(p));
  return out;
}

// Polls until `done` holds; false after `limit`.
inline bool eventually(const std::function<bool()>& done, std::chrono::seconds limit = kConverge) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return done();
}

// True once `b` answers every probe exactly as `a`.
inline bool same_answers(Served& a, Served& b, int tenants) {
  return eventually([&] { return answers(a, tenants) == answers(b, tenants); });
}

}  // namespace ic::rtest
