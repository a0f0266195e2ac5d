// Transport edge cases of docs/contract.md "Transport rules" against the real
// inferencecache-server, driven by a raw nghttp2 client (support/h2_client.hh)
// that puts on the wire what grpc++ never would. Each case asserts the gRPC
// status (or HTTP status), and that the connection and the server survive.
#include <doctest/doctest.h>

#include <string>

#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "support/builders.hh"
#include "support/grpc_frame.hh"
#include "support/h2_client.hh"
#include "support/server_process.hh"
#include "support/text.hh"

namespace pb = inferencecache::v1alpha1;
using namespace ic::itest;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t kLimit = 4u << 20;  // default receive limit per message, bytes

// A LookupRouteRequest whose serialization is exactly `size` bytes (>= 1 MiB):
// one prompt_text field (tag 0x52, 4-byte varint length). prompt_text over
// 1 MiB fails open to NO_HINT (docs/lookup.md "Defaults").
std::string lookup_of_size(std::size_t size) {
  pb::LookupRouteRequest req;
  req.set_prompt_text(std::string(size - 5, 'a'));
  std::string bytes = req.SerializeAsString();
  REQUIRE(bytes.size() == size);
  return bytes;
}

// `n` framed updates back to back.
std::string update_stream(int n) {
  std::string body;
  for (int i = 0; i < n; ++i) body += frame_message(ic::test::numbered_probe_update(i));
  return body;
}

// A LookupRoute answered OK with NO_HINT and adapter "lora-7" echoed: the
// message arrived whole.
void check_lookup_answer(const H2Response& r) {
  CHECK(r.http_status() == 200);
  REQUIRE(r.grpc_status() == kOk);
  auto resp = parse_single<pb::LookupRouteResponse>(r.body);
  CHECK(resp.reason_code() == "NO_HINT");
  CHECK(resp.replica_scores_size() == 0);
  CHECK(resp.adapter_id() == "lora-7");
}

void check_ack(const H2Response& r) {
  CHECK(r.http_status() == 200);
  REQUIRE(r.grpc_status() == kOk);
  CHECK(parse_single<pb::Ack>(r.body).accepted());
}

// An update for a real tenant: replica r<i % 8>, one prefix unique to `i`,
// stats; GetCacheState then counts what was ingested (docs/index.md "GetCacheState").
pb::CacheStateUpdate tenant_update(std::string_view tenant, int i) {
  pb::CacheStateUpdate u;
  u.set_replica_id(numbered("r", i % 8));
  u.set_model_id("llama-3-8b");
  u.set_tenant_id(std::string(tenant));
  u.set_hash_scheme("vllm-sha256");
  auto* p = u.add_prefixes();
  p->set_prefix_hash(numbered("prefix-", i));
  p->set_token_count(16);
  u.mutable_stats()->set_replica_id(u.replica_id());
  u.mutable_stats()->set_hit_rate(0.5f);
  return u;
}

std::string tenant_stream(std::string_view tenant, int first, int n) {
  std::string body;
  for (int i = first; i < first + n; ++i) body += frame_message(tenant_update(tenant, i));
  return body;
}

// GetCacheState for (tenant, llama-3-8b) on connection `c`.
pb::GetCacheStateResponse cache_state(H2Client& c, std::string_view tenant) {
  pb::GetCacheStateRequest req;
  req.set_tenant_id(std::string(tenant));
  req.set_model_id("llama-3-8b");
  const H2Response& r = c.wait(c.start(method_path("GetCacheState"), BodyPlan{frame_message(req)}));
  REQUIRE(r.grpc_status() == kOk);
  return parse_single<pb::GetCacheStateResponse>(r.body);
}

// The connection still serves a normal call after an error on one stream.
void check_connection_usable(H2Client& c) {
  int32_t id = c.start(kLookupRoutePath, BodyPlan{frame_message(ic::test::gateway_request())});
  check_lookup_answer(c.wait(id));
}

}  // namespace

TEST_CASE("message framing and size limits") {
  ServerProcess server;
  H2Client c(server.grpc_port());

  SUBCASE("an empty message is a valid empty request") {
    int32_t id = c.start(kLookupRoutePath, BodyPlan{frame("")});
    const H2Response& r = c.wait(id);
    REQUIRE(r.grpc_status() == kOk);
    auto resp = parse_single<pb::LookupRouteResponse>(r.body);
    CHECK(resp.reason_code() == "NO_HINT");
    CHECK(r.find("content-type").value_or("").rfind("application/grpc", 0) == 0);
  }
  SUBCASE("a message of exactly the 4 MiB limit is accepted") {
    int32_t id = c.start(kLookupRoutePath, BodyPlan{frame(lookup_of_size(kLimit))});
    const H2Response& r = c.wait(id, 30s);
    REQUIRE(r.grpc_status() == kOk);
    CHECK(parse_single<pb::LookupRouteResponse>(r.body).reason_code() == "NO_HINT");
  }
  SUBCASE("a message one byte over the limit is RESOURCE_EXHAUSTED") {
    int32_t id = c.start(kLookupRoutePath, BodyPlan{frame(lookup_of_size(kLimit + 1))});
    const H2Response& r = c.wait(id, 30s);
    CHECK(r.http_status() == 200);
    CHECK(r.grpc_status() == kResourceExhausted);
    CHECK(r.body.empty());
    check_connection_usable(c);
  }
  SUBCASE("a prefix announcing 4 GiB is refused before any payload arrives") {
    int32_t id = c.start(kLookupRoutePath, BodyPlan{frame_prefix(0xffffffffu), 0, false});
    const H2Response& r = c.wait(id);
    CHECK(r.grpc_status() == kResourceExhausted);
    check_connection_usable(c);
  }
  SUBCASE("a unary call with two messages is refused") {
    // grpc/grpc PROTOCOL-HTTP2.md: a unary request carries exactly one message.
    std::string two =
        frame_message(ic::test::gateway_request()) + frame_message(ic::test::gateway_request());
    int32_t id = c.start(kLookupRoutePath, BodyPlan{two});
    const H2Response& r = c.wait(id);
    CHECK(r.grpc_status().value_or(kOk) != kOk);
    check_connection_usable(c);
  }
  SUBCASE("a unary call with no message is refused") {
    int32_t id = c.start(kLookupRoutePath, BodyPlan{""});
    const H2Response& r = c.wait(id);
    CHECK(r.grpc_status().value_or(kOk) != kOk);
    check_connection_usable(c);
  }
  SUBCASE("a body cut inside a message is refused") {
    std::string msg = frame_message(ic::test::gateway_request());
    int32_t id = c.start(kLookupRoutePath, BodyPlan{msg.substr(0, msg.size() - 3)});
    const H2Response& r = c.wait(id);
    CHECK(r.grpc_status().value_or(kOk) != kOk);
    check_connection_usable(c);
  }
  CHECK(server.stop() == 0);
}

TEST_CASE("message boundaries are independent of DATA frame boundaries") {
  ServerProcess server;
  H2Client c(server.grpc_port());
  const std::string unary = frame_message(ic::test::gateway_request());

  SUBCASE("unary: one byte per DATA frame") {
    check_lookup_answer(c.wait(c.start(kLookupRoutePath, BodyPlan{unary, 1})));
  }
  SUBCASE("unary: the 5-byte prefix split 3 + 2") {
    check_lookup_answer(c.wait(c.start(kLookupRoutePath, BodyPlan{unary, 3})));
  }
  SUBCASE("unary: headers first, the message much later in its own frames") {
    int32_t id = c.start(kLookupRoutePath, BodyPlan{"", 0, false});
    c.flush();
    c.run_until([] { return false; }, 100ms);
    c.send(id, unary.substr(0, 2), false);
    c.flush();
    c.send(id, unary.substr(2), true);
    check_lookup_answer(c.wait(id));
  }
  SUBCASE("client stream: 50 messages, one byte per DATA frame") {
    check_ack(c.wait(c.start(kReportCacheStatePath, BodyPlan{update_stream(50), 1}), 60s));
  }
  SUBCASE("client stream: 7-byte frames (every prefix straddles a frame)") {
    check_ack(c.wait(c.start(kReportCacheStatePath, BodyPlan{update_stream(200), 7}), 30s));
  }
  SUBCASE("client stream: 300 messages in DATA frames as large as the server allows") {
    check_ack(c.wait(c.start(kReportCacheStatePath, BodyPlan{update_stream(300), 0})));
  }
  SUBCASE("client stream: a 3 MiB message among small ones") {
    pb::CacheStateUpdate big = ic::test::numbered_probe_update(1);
    for (int i = 0; i < 3 * 1024; ++i) {
      auto* p = big.add_prefixes();
      p->set_prefix_hash(std::string(1000, static_cast<char>(i)));
      p->set_token_count(16);
    }
    std::string body = update_stream(3) + frame_message(big) + update_stream(3);
    check_ack(c.wait(c.start(kReportCacheStatePath, BodyPlan{body, 0}), 30s));
  }
  SUBCASE("client stream: END_STREAM alone in an empty DATA frame") {
    int32_t id = c.start(kReportCacheStatePath, BodyPlan{update_stream(5), 0, false});
    c.flush();
    c.send(id, "", true);
    check_ack(c.wait(id));
  }
  CHECK(server.stop() == 0);
}

TEST_CASE("every message of a client stream split across DATA frames is ingested") {
  ServerProcess server;
  H2Client c(server.grpc_port());
  // 40 updates in 1-byte frames, 40 in 7-byte frames, 40 in frames as large as allowed.
  check_ack(c.wait(c.start(kReportCacheStatePath, BodyPlan{tenant_stream("team-frames", 0, 40), 1}),
                   60s));
  check_ack(c.wait(
      c.start(kReportCacheStatePath, BodyPlan{tenant_stream("team-frames", 40, 40), 7}), 30s));
  check_ack(
      c.wait(c.start(kReportCacheStatePath, BodyPlan{tenant_stream("team-frames", 80, 40), 0})));
  pb::GetCacheStateResponse state = cache_state(c, "team-frames");
  CHECK(state.summary().total_prefixes() == 120);
  REQUIRE(state.replicas_size() == 8);
  for (int i = 0; i < 8; ++i) CHECK(state.replicas(i).replica_id() == numbered("r", i));
  CHECK(server.stop() == 0);
}

TEST_CASE("refused requests: compression, unknown paths, content-type, bad protobuf") {
  ServerProcess server;
  H2Client c(server.grpc_port());

  SUBCASE("compressed flag set: UNIMPLEMENTED (only identity encoding)") {
    std::string payload = ic::test::gateway_request().SerializeAsString();
    int32_t id =
        c.start(kLookupRoutePath, BodyPlan{frame(payload, true)}, {{"grpc-encoding", "gzip"}});
    const H2Response& r = c.wait(id);
    CHECK(r.http_status() == 200);
    CHECK(r.grpc_status() == kUnimplemented);
    check_connection_usable(c);
  }
  SUBCASE("compressed flag set without grpc-encoding: UNIMPLEMENTED") {
    std::string payload = ic::test::gateway_request().SerializeAsString();
    const H2Response& r = c.wait(c.start(kLookupRoutePath, BodyPlan{frame(payload, true)}));
    CHECK(r.grpc_status() == kUnimplemented);
  }
  SUBCASE("grpc-accept-encoding advertises identity") {
    const H2Response& r =
        c.wait(c.start(kLookupRoutePath, BodyPlan{frame_message(ic::test::gateway_request())}));
    REQUIRE(r.find("grpc-accept-encoding").has_value());
    CHECK(r.find("grpc-accept-encoding")->find("identity") != std::string::npos);
  }
  SUBCASE("unknown method: UNIMPLEMENTED, trailers-only") {
    const H2Response& r = c.wait(
        c.start(method_path("NoSuchMethod"), BodyPlan{frame_message(ic::test::gateway_request())}));
    CHECK(r.http_status() == 200);
    CHECK(r.grpc_status() == kUnimplemented);
    CHECK(r.body.empty());
    CHECK(r.trailers.empty());  // grpc-status came in the only HEADERS block
    check_connection_usable(c);
  }
  SUBCASE("unknown service: UNIMPLEMENTED") {
    const H2Response& r = c.wait(c.start("/no.such.v1.Service/LookupRoute", BodyPlan{frame("")}));
    CHECK(r.http_status() == 200);
    CHECK(r.grpc_status() == kUnimplemented);
    check_connection_usable(c);
  }
  SUBCASE("content-type text/plain: HTTP 415") {
    const H2Response& r =
        c.wait(c.start(kLookupRoutePath, BodyPlan{frame_message(ic::test::gateway_request())},
                       {{"content-type", "text/plain"}}));
    CHECK(r.http_status() == 415);
    check_connection_usable(c);
  }
  SUBCASE("content-type application/grpc+proto is gRPC") {
    check_lookup_answer(
        c.wait(c.start(kLookupRoutePath, BodyPlan{frame_message(ic::test::gateway_request())},
                       {{"content-type", "application/grpc+proto"}})));
  }
  SUBCASE("garbage protobuf: INVALID_ARGUMENT") {
    // Field 1 (string) announces 5 bytes and the message ends after 2.
    const H2Response& r = c.wait(c.start(kLookupRoutePath, BodyPlan{frame(std::string("\x0a\x05"
                                                                                      "ab"))}));
    CHECK(r.http_status() == 200);
    CHECK(r.grpc_status() == kInvalidArgument);
    check_connection_usable(c);
  }
  SUBCASE("garbage protobuf in a client stream: INVALID_ARGUMENT") {
    std::string body = update_stream(3) + frame(std::string("\xff\xff\xff\xff\xff", 5));
    const H2Response& r = c.wait(c.start(kReportCacheStatePath, BodyPlan{body}));
    CHECK(r.grpc_status() == kInvalidArgument);
    check_connection_usable(c);
  }
  SUBCASE("GET is not a gRPC call") {
    HeaderList h = {{":method", "GET"},
                    {":scheme", "http"},
                    {":path", kLookupRoutePath},
                    {":authority", "127.0.0.1"},
                    {"content-type", "application/grpc"},
                    {"te", "trailers"}};
    const H2Response& r = c.wait(c.start_raw(h, BodyPlan{""}));
    bool refused = r.http_status() == 405 || r.grpc_status().value_or(kOk) != kOk || r.reset;
    CHECK(refused);
    check_connection_usable(c);
  }
  CHECK(server.stop() == 0);
}

TEST_CASE("grpc-timeout: a call that cannot finish in time is DEADLINE_EXCEEDED") {
  ServerProcess server;
  H2Client c(server.grpc_port());

  SUBCASE("a client stream left open past 200 ms") {
    int32_t id = c.start(kReportCacheStatePath, BodyPlan{update_stream(2), 0, false},
                         {{"grpc-timeout", "200m"}});
    auto t0 = std::chrono::steady_clock::now();
    const H2Response& r = c.wait(id, 10s);
    auto took = std::chrono::steady_clock::now() - t0;
    CHECK(r.grpc_status() == kDeadlineExceeded);
    CHECK(took >= 150ms);  // not before the deadline (timer slack allowed)
    check_connection_usable(c);
  }
  SUBCASE("a unary whose message never completes, timeout in microseconds") {
    std::string msg = frame_message(ic::test::gateway_request());
    int32_t id = c.start(kLookupRoutePath, BodyPlan{msg.substr(0, 4), 0, false},
                         {{"grpc-timeout", "300000u"}});
    const H2Response& r = c.wait(id, 10s);
    CHECK(r.grpc_status() == kDeadlineExceeded);
    check_connection_usable(c);
  }
  SUBCASE("a generous timeout does not fire") {
    int32_t id =
        c.start(kReportCacheStatePath, BodyPlan{update_stream(2)}, {{"grpc-timeout", "10S"}});
    check_ack(c.wait(id));
  }
  CHECK(server.stop() == 0);
}

TEST_CASE("a client that cancels mid-stream loses nothing else and leaks nothing") {
  ServerProcess server;
  {
    H2Client c(server.grpc_port());
    // A client stream with two messages received, a third half-sent, then CANCEL.
    std::string third = frame_message(ic::test::numbered_probe_update(3));
    int32_t stream =
        c.start(kReportCacheStatePath, BodyPlan{update_stream(2) + third.substr(0, 6), 0, false});
    // A unary with half its message sent, then CANCEL.
    std::string msg = frame_message(ic::test::gateway_request());
    int32_t unary = c.start(kLookupRoutePath, BodyPlan{msg.substr(0, 7), 0, false});
    c.flush();
    c.run_until([] { return false; }, 100ms);
    c.reset(stream);
    c.reset(unary);
    c.flush();
    c.run_until([&] { return c.response(stream).closed && c.response(unary).closed; }, 5s);
    CHECK_FALSE(c.eof());
    // The same connection and a fresh one both still serve.
    check_connection_usable(c);
    H2Client fresh(server.grpc_port());
    check_connection_usable(fresh);
  }
  {
    // 100 streams cancelled right after their HEADERS (well under the rapid
    // reset limit), then a normal call.
    H2Client c(server.grpc_port());
    for (int i = 0; i < 100; ++i) {
      int32_t id = c.start(kReportCacheStatePath, BodyPlan{update_stream(1), 0, false});
      c.flush();
      c.reset(id);
    }
    c.flush();
    check_connection_usable(c);
  }
  {
    // A connection dropped with streams open.
    auto c = std::make_unique<H2Client>(server.grpc_port());
    for (int i = 0; i < 10; ++i)
      c->start(kReportCacheStatePath, BodyPlan{update_stream(3), 0, false});
    c->flush();
    c.reset();
  }
  CHECK(health_serving(server.grpc_port(), 5s));
  CHECK(server.running());
  CHECK(server.stop() == 0);  // under ASan, LeakSanitizer makes this non-zero on a leak
}

TEST_CASE("a client stream cut mid-way keeps every message already fully received") {
  // docs/contract.md "Transport rules". Its own server: the ingested tenant makes
  // the index warm, so other tests' cold-index answers would change.
  ServerProcess server;
  {
    // A client stream cut mid-way keeps every message already fully received
    // (docs/contract.md "Transport rules"): 5 whole updates, half of a 6th, CANCEL.
    H2Client c(server.grpc_port());
    std::string sixth = frame_message(tenant_update("team-cut", 5));
    int32_t id = c.start(kReportCacheStatePath,
                         BodyPlan{tenant_stream("team-cut", 0, 5) + sixth.substr(0, 20), 0, false});
    c.flush();
    c.run_until([] { return false; }, 200ms);
    c.reset(id);
    c.flush();
    // Ingest is asynchronous to the ack-less stream: poll briefly, then assert exactly 5.
    pb::GetCacheStateResponse state;
    for (int i = 0; i < 40; ++i) {
      state = cache_state(c, "team-cut");
      if (state.summary().total_prefixes() >= 5) break;
      c.run_until([] { return false; }, 50ms);
    }
    CHECK(state.summary().total_prefixes() == 5);
    CHECK(state.replicas_size() == 5);
  }
  CHECK(server.stop() == 0);
}
