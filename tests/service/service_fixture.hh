#pragma once
// A CoreGrpcServer behind one in-memory connection driven by an nghttp2 client.

#include <google/protobuf/message.h>

#include <memory>
#include <string>
#include <vector>

#include "h2_harness.hh"
#include "service/grpc_server.hh"

namespace ic::test {

struct ServiceFixture {
  explicit ServiceFixture(service::GrpcServiceOptions opts = {}) : options(std::move(opts)) {
    server = std::make_unique<service::CoreGrpcServer>(options, timers);
    session = server->session_factory()(conn);
  }
  bool run() { return pump(client, *session, conn); }

  // Unary call with `request`; returns the stream id after pumping.
  std::int32_t call(const std::string& path, const google::protobuf::Message& request) {
    const auto id = client.grpc_call(path, frame(request.SerializeAsString()));
    run();
    return id;
  }
  // Parses the only response message of stream `id` into `out`.
  template <typename T>
  T single(std::int32_t id) {
    const auto msgs = unframe(client.streams[id].body);
    REQUIRE(msgs.size() == 1);
    T out;
    REQUIRE(out.ParseFromString(msgs[0]));
    return out;
  }

  service::GrpcServiceOptions options;
  ManualTimers timers;
  FakeConnection conn;
  std::unique_ptr<service::CoreGrpcServer> server;
  std::unique_ptr<net::Session> session;
  H2Client client;
};

}  // namespace ic::test
