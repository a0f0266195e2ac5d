// Transport microbenchmarks, part 2: the nghttp2 pump per request. A real
// nghttp2 client (tests' in-memory harness) talks to our gRPC server session (h2::ServerSession +
// rpc::ServerCalls) over a fake connection; only the SERVER side is timed (on_data = mem_recv +
// dispatch + handler, flush = mem_send + coalesce), per request, for
// `batch` unary calls arriving in one read. Handlers answer at once without
// any index work, so this is the per-call transport cost of one core.
#include <benchmark/benchmark.h>

#include <chrono>
#include <span>
#include <string>

#include "h2_harness.hh"
#include "hot_request.hh"
#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "rpc/server_calls.hh"
#include "rpc/typed.hh"

namespace {

namespace pb = ::inferencecache::v1alpha1;
using ic::rpc::CallHandle;
using ic::rpc::CallKind;

constexpr const char* kRender = "/inferencecache.v1alpha1.InferenceCache/RenderTemplate";
constexpr const char* kLookup = "/inferencecache.v1alpha1.InferenceCache/LookupRoute";

ic::rpc::MethodTable methods() {
  ic::rpc::MethodTable table;
  table.add(kRender, ic::rpc::single_request_method<pb::RenderTemplateRequest>(
                         CallKind::kUnary, [](CallHandle& call, pb::RenderTemplateRequest&&) {
                           pb::RenderTemplateResponse response;
                           response.set_reason_code("OK");
                           call.reply(response);
                         }));
  // LookupRoute-shaped: decodes the 8-block request, answers 2 replicas.
  table.add(kLookup, ic::rpc::single_request_method<pb::LookupRouteRequest>(
                         CallKind::kUnary, [](CallHandle& call, pb::LookupRouteRequest&&) {
                           pb::LookupRouteResponse response;
                           for (int i = 0; i < 2; ++i) {
                             pb::ReplicaScore* s = response.add_replica_scores();
                             s->set_replica_id(i == 0 ? "replica-0" : "replica-1");
                             s->set_score(86.4f);
                             s->set_matched_tokens(128);
                           }
                           response.set_reason_code("PREFIX_MATCH");
                           call.reply(response);
                         }));
  return table;
}

std::string request_body(bool lookup) {
  if (!lookup) {
    pb::RenderTemplateRequest r;
    r.set_template_ref("perf-template");
    r.set_tenant_id("tenant-0");
    return ic::test::frame(r.SerializeAsString());
  }
  return ic::test::frame(ic::perf::hot_lookup_request().SerializeAsString());
}

// range(0) = calls per read (1 = one request per loop turn; 16 = a busy
// connection); range(1) = 0 RenderTemplate, 1 LookupRoute-shaped.
void BM_GrpcUnaryServerPump(benchmark::State& state) {
  const auto batch = static_cast<int>(state.range(0));
  const bool lookup = state.range(1) == 1;
  const ic::rpc::MethodTable table = methods();
  ic::test::ManualTimers timers;
  ic::rpc::ServerContext context;
  context.methods = &table;
  context.timers = &timers;
  ic::test::FakeConnection conn;
  const auto owned = ic::rpc::make_server_session(conn, context);
  ic::h2::ServerSession& session = *owned;
  ic::test::H2Client client;
  ic::test::pump(client, session, conn);  // SETTINGS exchange
  const std::string body = request_body(lookup);
  const char* path = lookup ? kLookup : kRender;
  std::int64_t responses = 0;
  for (auto _ : state) {
    for (int i = 0; i < batch; ++i) client.grpc_call(path, body);
    const std::string up = client.take_output();
    const auto start = std::chrono::steady_clock::now();
    session.on_data(std::as_bytes(std::span(up.data(), up.size())));
    session.flush();
    const auto stop = std::chrono::steady_clock::now();
    std::string down;
    down.swap(conn.out);
    client.receive(down);
    for (const auto& [id, s] : client.streams) responses += s.closed ? 1 : 0;
    client.streams.clear();
    state.SetIterationTime(std::chrono::duration<double>(stop - start).count());
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["answered"] =
      static_cast<double>(responses) / static_cast<double>(state.iterations() * batch);
}
BENCHMARK(BM_GrpcUnaryServerPump)
    ->ArgNames({"batch", "lookup"})
    ->ArgsProduct({{1, 16}, {0, 1}})
    ->UseManualTime();

}  // namespace

BENCHMARK_MAIN();
