// The endpoint picker's messages held while a pick is on its way
// (docs/gateway.md "Fail open"): in full-duplex mode Envoy keeps passing a
// body over the limit on while the tenant's owner core answers. A stream holds
// those messages up to --gateway-max-body-bytes (2 KiB here), then picks by
// load on its own core and goes on; the pick that comes back later is dropped.
// The whole request is one write (one read for the server), so a stream whose
// tenant the other core owns crosses the bound before its pick can come back.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "envoy/service/ext_proc/v3/external_processor.pb.h"
#include "support/grpc_frame.hh"
#include "support/h2_client.hh"
#include "support/server_process.hh"

using namespace ic::itest;
namespace xp = envoy::service::ext_proc::v3;

namespace {

constexpr std::string_view kProcess = "/envoy.service.ext_proc.v3.ExternalProcessor/Process";
const std::string kA = "10.0.0.1:8000";
const std::string kB = "10.0.0.2:8000";

// A chat request's headers for `tenant`, with the subset hint [A, B].
xp::ProcessingRequest headers(const std::string& tenant) {
  xp::ProcessingRequest r;
  auto* h = r.mutable_request_headers()->mutable_headers();
  auto add = [h](const std::string& key, const std::string& value) {
    auto* v = h->add_headers();
    v->set_key(key);
    v->set_raw_value(value);
  };
  add(":path", "/v1/chat/completions");
  add("x-tenant-id", tenant);
  auto& hint = (*r.mutable_metadata_context()->mutable_filter_metadata())["envoy.lb.subset_hint"];
  auto& list = (*hint.mutable_fields())["x-gateway-destination-endpoint-subset"];
  list.mutable_list_value()->add_values()->set_string_value(kA);
  list.mutable_list_value()->add_values()->set_string_value(kB);
  return r;
}

xp::ProcessingRequest chunk(const std::string& bytes, bool end) {
  xp::ProcessingRequest r;
  r.mutable_request_body()->set_body(bytes);
  r.mutable_request_body()->set_end_of_stream(end);
  return r;
}

}  // namespace

TEST_CASE("full duplex: a body passed on faster than its pick comes back goes back whole") {
  ServerOptions o;
  o.extra_args = {"--threads", "2", "--gateway-max-body-bytes", "2048"};
  ServerProcess server(o);
  // Six tenants: some owned by the core that is not the connection's, but
  // for a 1-in-32 draw (each tenant's owner is its hash, docs/architecture.md).
  for (int t = 0; t < 6; ++t) {
    CAPTURE(t);
    std::string body = frame_message(headers("queue-t" + std::to_string(t)));
    std::string expect(3000, 'a');  // over the limit at once: picked by load, passed through
    body += frame_message(chunk(expect, false));
    for (int i = 0; i < 300; ++i) {
      const std::string bytes = std::to_string(1000 + i);
      body += frame_message(chunk(bytes, i == 299));
      expect += bytes;
    }
    H2Client client(server.grpc_port());
    const H2Response& answer = client.wait(client.start(kProcess, BodyPlan{body}));
    CHECK(answer.grpc_status() == kOk);
    const std::vector<std::string> parts = unframe(answer.body);
    REQUIRE(parts.size() >= 2);
    xp::ProcessingResponse pick;
    REQUIRE(pick.ParseFromString(parts[0]));
    REQUIRE(pick.has_request_headers());
    const auto& set = pick.request_headers().response().header_mutation().set_headers();
    REQUIRE(set.size() == 1);
    const std::string& endpoints = set[0].header().raw_value();
    CHECK((endpoints == kA + "," + kB || endpoints == kB + "," + kA));
    std::string passed;
    bool ended = false;
    for (std::size_t i = 1; i < parts.size(); ++i) {
      xp::ProcessingResponse r;
      REQUIRE(r.ParseFromString(parts[i]));
      REQUIRE(r.has_request_body());
      CHECK_FALSE(ended);
      const auto& streamed = r.request_body().response().body_mutation().streamed_response();
      passed += streamed.body();
      ended = streamed.end_of_stream();
    }
    CHECK(ended);
    CHECK(passed == expect);
  }
  CHECK(server.stop() == 0);
}
