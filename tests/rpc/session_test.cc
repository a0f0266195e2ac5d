#include "rpc/server_calls.hh"

#include <doctest/doctest.h>
#include <google/protobuf/wrappers.pb.h>

#include <memory>
#include <string>
#include <vector>

#include "h2_harness.hh"
#include "rpc/typed.hh"

namespace {

using google::protobuf::Int32Value;
using google::protobuf::StringValue;
using ic::rpc::CallHandle;
using ic::rpc::CallKind;
using ic::rpc::Method;
using ic::rpc::StatusCode;
using ic::test::frame;
using ic::test::unframe;

std::string sv_bytes(const std::string& v) {
  StringValue m;
  m.set_value(v);
  return m.SerializeAsString();
}

std::string sv_of(const std::string& bytes) {
  StringValue m;
  REQUIRE(m.ParseFromString(bytes));
  return m.value();
}

// Client-streaming: records every message, replies with the count.
struct Recorder : ic::rpc::CallHandler {
  Recorder(CallHandle c, std::vector<std::string>* log, int* cancels)
      : call(std::move(c)), log(log), cancels(cancels) {}
  void on_message(std::span<const std::byte> m) override {
    StringValue v;
    if (!ic::rpc::parse_request(m, v, call)) return;
    log->push_back(v.value());
  }
  void on_half_close() override {
    Int32Value n;
    n.set_value(static_cast<int>(log->size()));
    call.reply(n);
  }
  void on_cancel() override { ++*cancels; }
  CallHandle call;
  std::vector<std::string>* log;
  int* cancels;
};

// Bidi: echoes each message at once.
struct Echoer : ic::rpc::CallHandler {
  explicit Echoer(CallHandle c) : call(std::move(c)) {}
  void on_message(std::span<const std::byte> m) override {
    StringValue v;
    if (ic::rpc::parse_request(m, v, call)) call.write(v);
  }
  void on_half_close() override { call.finish(ic::rpc::Status::ok()); }
  CallHandle call;
};

struct Fixture {
  Fixture() {
    options.max_message_bytes = 1024;
    methods.add("/test.Echo/Unary", ic::rpc::single_request_method<StringValue>(
                                        CallKind::kUnary, [](CallHandle c, StringValue&& r) {
                                          StringValue out;
                                          out.set_value("echo:" + r.value());
                                          c.reply(out);
                                        }));
    methods.add("/test.Echo/Async", ic::rpc::single_request_method<StringValue>(
                                        CallKind::kUnary, [this](CallHandle c, StringValue&& r) {
                                          parked.emplace_back(std::move(c), r.value());
                                        }));
    methods.add("/test.Echo/Self", ic::rpc::single_request_method<StringValue>(
                                       CallKind::kUnary,
                                       [this](CallHandle c, StringValue&& r) {
                                         parked.emplace_back(std::move(c), r.value());
                                       },
                                       /*handles_deadline=*/true));
    methods.add("/test.Echo/Fail", ic::rpc::single_request_method<StringValue>(
                                       CallKind::kUnary, [](CallHandle c, StringValue&&) {
                                         c.finish({StatusCode::kNotFound, "no such thing: 100%"});
                                       }));
    methods.add("/test.Echo/Repeat",
                ic::rpc::single_request_method<StringValue>(
                    CallKind::kServerStreaming, [](CallHandle c, StringValue&& r) {
                      for (int i = 0; i < 3; ++i) {
                        StringValue out;
                        out.set_value(r.value() + std::to_string(i));
                        c.write(out);
                      }
                      c.finish(ic::rpc::Status::ok());
                    }));
    Method record;
    record.kind = CallKind::kClientStreaming;
    record.make = [this](CallHandle c) {
      return std::make_unique<Recorder>(std::move(c), &recorded, &cancels);
    };
    methods.add("/test.Echo/Record", record);
    Method echo;
    echo.kind = CallKind::kBidiStreaming;
    echo.make = [](CallHandle c) { return std::make_unique<Echoer>(std::move(c)); };
    methods.add("/test.Echo/Bidi", echo);
    context.methods = &methods;
    context.options = options;
    context.timers = &timers;
    session = ic::rpc::make_server_session(conn, context);
  }
  bool run() { return ic::test::pump(client, *session, conn); }
  // Calls `path` with one StringValue `value` and checks the answer is a
  // trailers-only response (one header block) with this grpc-status and
  // (percent-encoded) grpc-message; returns the stream for more checks.
  const ic::test::ClientStream& trailers_only(const std::string& path, const std::string& value,
                                              const std::string& status,
                                              const std::string& message) {
    const auto id = client.grpc_call(path, frame(sv_bytes(value)));
    run();
    const auto& s = client.streams[id];
    CHECK(s.header_blocks == 1);
    CHECK(s.header("grpc-status") == status);
    CHECK(s.header("grpc-message") == message);
    return s;
  }
  // The gRPC layer on top of the connection's HTTP/2 session.
  ic::rpc::ServerCalls& calls() {
    return static_cast<ic::rpc::ServerCalls&>(session->application());
  }

  ic::rpc::ServerOptions options;
  ic::rpc::MethodTable methods;
  ic::rpc::ServerContext context;
  ic::test::ManualTimers timers;
  ic::test::FakeConnection conn;
  std::unique_ptr<ic::h2::ServerSession> session;
  ic::test::H2Client client;
  std::vector<std::pair<CallHandle, std::string>> parked;
  std::vector<std::string> recorded;
  int cancels = 0;
};

}  // namespace

TEST_CASE_FIXTURE(Fixture, "unary call: headers, one message, trailers with grpc-status 0") {
  const auto id = client.grpc_call("/test.Echo/Unary", frame(sv_bytes("hi")));
  CHECK(run());
  const auto& s = client.streams[id];
  CHECK(s.closed);
  CHECK(s.close_error_code == 0);
  CHECK(s.header(":status") == "200");
  CHECK(s.header("content-type") == "application/grpc");
  CHECK(s.header("grpc-accept-encoding") == "identity");
  CHECK(s.header("grpc-status").empty());
  CHECK(s.trailer("grpc-status") == "0");
  CHECK(s.trailer("grpc-message").empty());
  CHECK(s.header_blocks == 2);
  const auto msgs = unframe(s.body);
  REQUIRE(msgs.size() == 1);
  CHECK(sv_of(msgs[0]) == "echo:hi");
  CHECK(calls().active_calls() == 0);
  CHECK(session->idle());
}

TEST_CASE_FIXTURE(Fixture, "server bytes arriving one at a time give the same answer") {
  const auto id = client.grpc_call("/test.Echo/Unary", frame(sv_bytes("bytewise")));
  CHECK(ic::test::pump(client, *session, conn, 1));
  const auto msgs = unframe(client.streams[id].body);
  REQUIRE(msgs.size() == 1);
  CHECK(sv_of(msgs[0]) == "echo:bytewise");
  CHECK(client.streams[id].trailer("grpc-status") == "0");
}

TEST_CASE_FIXTURE(Fixture, "a request message split across DATA frames") {
  const std::string f = frame(sv_bytes("split-me"));
  const auto id = client.grpc_call("/test.Echo/Unary", f.substr(0, 3), false);
  run();
  client.send(id, f.substr(3, 6), false);
  run();
  CHECK_FALSE(client.streams[id].closed);
  client.send(id, f.substr(9), true);
  run();
  const auto msgs = unframe(client.streams[id].body);
  REQUIRE(msgs.size() == 1);
  CHECK(sv_of(msgs[0]) == "echo:split-me");
}

TEST_CASE_FIXTURE(Fixture, "unknown method is a trailers-only UNIMPLEMENTED") {
  const auto& s = trailers_only("/test.Echo/Nope", "x", "12", "unknown method /test.Echo/Nope");
  CHECK(s.header(":status") == "200");
  CHECK(s.header("content-type") == "application/grpc");
  CHECK(s.body.empty());
  CHECK(s.trailers.empty());
  CHECK(s.closed);
}

TEST_CASE_FIXTURE(Fixture, "unknown service is UNIMPLEMENTED too") {
  const auto id = client.grpc_call("/nope.Service/Unary", frame(sv_bytes("x")));
  run();
  CHECK(client.streams[id].grpc_status() == "12");
}

TEST_CASE_FIXTURE(Fixture, "non-gRPC content-type gets HTTP 415") {
  const auto id = client.request({{":method", "POST"},
                                  {":scheme", "http"},
                                  {":authority", "localhost"},
                                  {":path", "/test.Echo/Unary"},
                                  {"content-type", "application/json"}},
                                 "{}", true);
  run();
  const auto& s = client.streams[id];
  CHECK(s.header(":status") == "415");
  CHECK(s.grpc_status().empty());
  CHECK(s.closed);
}

TEST_CASE_FIXTURE(Fixture, "application/grpc+proto is accepted; GET is HTTP 405") {
  const auto ok = client.grpc_call("/test.Echo/Unary", frame(sv_bytes("p")), true,
                                   {{"content-type", "application/grpc+proto"}});
  // the harness sends both content-type fields; add a clean one as well
  const auto plus = client.request({{":method", "POST"},
                                    {":scheme", "http"},
                                    {":authority", "localhost"},
                                    {":path", "/test.Echo/Unary"},
                                    {"content-type", "application/grpc+proto"}},
                                   frame(sv_bytes("q")), true);
  const auto get = client.request({{":method", "GET"},
                                   {":scheme", "http"},
                                   {":authority", "localhost"},
                                   {":path", "/test.Echo/Unary"}},
                                  "", true);
  run();
  CHECK(client.streams[ok].header(":status") == "200");
  CHECK(client.streams[plus].trailer("grpc-status") == "0");
  CHECK(client.streams[get].header(":status") == "405");
}

TEST_CASE_FIXTURE(Fixture, "undecodable protobuf is INVALID_ARGUMENT") {
  const auto id = client.grpc_call("/test.Echo/Unary", frame(std::string("\x0a\x05"
                                                                         "ab",
                                                                         4)));
  run();
  const auto& s = client.streams[id];
  CHECK(s.header_blocks == 1);
  CHECK(s.grpc_status() == "3");
  CHECK(s.grpc_message() == "request message does not decode as google.protobuf.StringValue");
}

TEST_CASE_FIXTURE(Fixture,
                  "message over the limit is RESOURCE_EXHAUSTED, decided from the prefix") {
  std::string big = frame(std::string(2000, 'x'));
  const auto id = client.grpc_call("/test.Echo/Unary", big.substr(0, 5), false);
  run();
  const auto& s = client.streams[id];
  CHECK(s.grpc_status() == "8");
  CHECK(s.grpc_message() == "request message larger than max (1024 bytes)");
  // the client was still sending: the server resets the stream with NO_ERROR
  CHECK(s.rst_received);
  CHECK(s.closed);
  CHECK(calls().active_calls() == 0);
}

TEST_CASE_FIXTURE(Fixture, "a compressed message is UNIMPLEMENTED with grpc-accept-encoding") {
  const auto id = client.grpc_call("/test.Echo/Unary", frame(sv_bytes("z"), 1), true,
                                   {{"grpc-encoding", "gzip"}});
  run();
  const auto& s = client.streams[id];
  CHECK(s.grpc_status() == "12");
  CHECK(s.header("grpc-accept-encoding") == "identity");
}

TEST_CASE_FIXTURE(Fixture,
                  "handler error before any message is trailers-only, message percent-encoded") {
  trailers_only("/test.Echo/Fail", "f", "5", "no such thing: 100%25");
}

TEST_CASE_FIXTURE(Fixture, "two messages on a unary call, or none, are INTERNAL") {
  const auto two =
      client.grpc_call("/test.Echo/Unary", frame(sv_bytes("a")) + frame(sv_bytes("b")));
  const auto none = client.grpc_call("/test.Echo/Unary", "", true);
  const auto cut = client.grpc_call("/test.Echo/Unary", frame(sv_bytes("abc")).substr(0, 6));
  run();
  CHECK(client.streams[two].grpc_status() == "13");
  CHECK(client.streams[none].grpc_status() == "13");
  CHECK(client.streams[cut].grpc_status() == "13");
  CHECK(client.streams[cut].grpc_message() == "stream ended inside a message");
}

TEST_CASE_FIXTURE(Fixture, "server streaming sends every message then OK") {
  const auto id = client.grpc_call("/test.Echo/Repeat", frame(sv_bytes("n")));
  run();
  const auto msgs = unframe(client.streams[id].body);
  REQUIRE(msgs.size() == 3);
  CHECK(sv_of(msgs[0]) == "n0");
  CHECK(sv_of(msgs[1]) == "n1");
  CHECK(sv_of(msgs[2]) == "n2");
  CHECK(client.streams[id].trailer("grpc-status") == "0");
}

TEST_CASE_FIXTURE(Fixture, "bidi echoes each message before the client half-closes") {
  const auto id = client.grpc_call("/test.Echo/Bidi", frame(sv_bytes("one")), false);
  run();
  CHECK(unframe(client.streams[id].body).size() == 1);
  CHECK_FALSE(client.streams[id].closed);
  client.send(id, frame(sv_bytes("two")), true);
  run();
  const auto msgs = unframe(client.streams[id].body);
  REQUIRE(msgs.size() == 2);
  CHECK(sv_of(msgs[1]) == "two");
  CHECK(client.streams[id].trailer("grpc-status") == "0");
}

TEST_CASE_FIXTURE(Fixture, "client streaming counts every message at half-close") {
  const auto id = client.grpc_call("/test.Echo/Record", frame(sv_bytes("a")), false);
  run();
  client.send(id, frame(sv_bytes("b")) + frame(sv_bytes("c")), true);
  run();
  CHECK(recorded == std::vector<std::string>{"a", "b", "c"});
  const auto msgs = unframe(client.streams[id].body);
  REQUIRE(msgs.size() == 1);
  Int32Value n;
  REQUIRE(n.ParseFromString(msgs[0]));
  CHECK(n.value() == 3);
}

TEST_CASE_FIXTURE(Fixture, "RST_STREAM CANCEL mid client-stream keeps every complete message") {
  const std::string third = frame(sv_bytes("three"));
  const auto id =
      client.grpc_call("/test.Echo/Record",
                       frame(sv_bytes("one")) + frame(sv_bytes("two")) + third.substr(0, 4), false);
  run();
  CHECK(calls().active_calls() == 1);
  client.cancel(id);
  run();
  CHECK(recorded == std::vector<std::string>{"one", "two"});
  CHECK(cancels == 1);
  CHECK(calls().active_calls() == 0);
  CHECK(session->idle());
}

TEST_CASE_FIXTURE(Fixture, "RST_STREAM in the same read as the last messages still delivers them") {
  const auto id = client.grpc_call("/test.Echo/Record", frame(sv_bytes("x")), false);
  run();
  client.send(id, frame(sv_bytes("y")), false);
  // DATA and RST_STREAM leave the client in one write
  const std::string before = client.take_output();
  client.cancel(id);
  const std::string both = before + client.take_output();
  CHECK(session->on_data(std::as_bytes(std::span(both.data(), both.size()))));
  session->flush();
  CHECK(recorded == std::vector<std::string>{"x", "y"});
  CHECK(calls().active_calls() == 0);
}

TEST_CASE_FIXTURE(Fixture, "asynchronous completion answers later and asks for a flush") {
  const auto id = client.grpc_call("/test.Echo/Async", frame(sv_bytes("later")));
  run();
  REQUIRE(parked.size() == 1);
  CHECK_FALSE(client.streams[id].closed);
  const int flushes = conn.flush_requests;
  StringValue out;
  out.set_value("done:" + parked[0].second);
  parked[0].first.reply(out);
  CHECK(conn.flush_requests > flushes);
  run();
  const auto msgs = unframe(client.streams[id].body);
  REQUIRE(msgs.size() == 1);
  CHECK(sv_of(msgs[0]) == "done:later");
  CHECK(client.streams[id].trailer("grpc-status") == "0");
  CHECK_FALSE(parked[0].first.alive());
}

TEST_CASE_FIXTURE(Fixture, "completion after the stream was reset is a no-op") {
  const auto id = client.grpc_call("/test.Echo/Async", frame(sv_bytes("gone")));
  run();
  REQUIRE(parked.size() == 1);
  CHECK(parked[0].first.alive());
  client.cancel(id);
  run();
  CHECK_FALSE(parked[0].first.alive());
  StringValue out;
  CHECK_FALSE(parked[0].first.write(out));
  parked[0].first.finish(ic::rpc::Status::ok());
  CHECK(parked[0].first.deadline_us() == std::nullopt);
  run();
  CHECK(client.streams[id].body.empty());
  CHECK(calls().active_calls() == 0);
}

TEST_CASE_FIXTURE(Fixture, "completion after the connection closed is a no-op") {
  client.grpc_call("/test.Echo/Async", frame(sv_bytes("gone")));
  run();
  REQUIRE(parked.size() == 1);
  session->on_close();
  session.reset();
  StringValue out;
  CHECK_FALSE(parked[0].first.alive());
  parked[0].first.reply(out);
}

TEST_CASE_FIXTURE(Fixture, "grpc-timeout sets a deadline; past it DEADLINE_EXCEEDED") {
  const auto id = client.grpc_call("/test.Echo/Async", frame(sv_bytes("slow")), true,
                                   {{"grpc-timeout", "100m"}});
  run();
  REQUIRE(parked.size() == 1);
  CHECK(parked[0].first.deadline_us() == timers.now + 100'000);
  timers.advance(99'999);
  run();
  CHECK_FALSE(client.streams[id].closed);
  timers.advance(1);
  run();
  CHECK(client.streams[id].grpc_status() == "4");
  CHECK(client.streams[id].closed);
  CHECK_FALSE(parked[0].first.alive());
  CHECK(timers.pending.empty());
}

TEST_CASE_FIXTURE(Fixture, "a malformed grpc-timeout is ignored: no deadline") {
  client.grpc_call("/test.Echo/Async", frame(sv_bytes("x")), true, {{"grpc-timeout", "1.5S"}});
  run();
  REQUIRE(parked.size() == 1);
  CHECK(parked[0].first.deadline_us() == std::nullopt);
  CHECK(timers.pending.empty());
}

TEST_CASE_FIXTURE(Fixture, "a finished call cancels its deadline timer") {
  client.grpc_call("/test.Echo/Unary", frame(sv_bytes("x")), true, {{"grpc-timeout", "1S"}});
  run();
  CHECK(timers.pending.empty());
}

TEST_CASE_FIXTURE(Fixture, "many concurrent streams all complete") {
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 250; ++i) {
    ids.push_back(client.grpc_call("/test.Echo/Unary", frame(sv_bytes(std::to_string(i)))));
  }
  run();
  for (int i = 0; i < 250; ++i) {
    const auto& s = client.streams[ids[static_cast<std::size_t>(i)]];
    REQUIRE(s.closed);
    const auto msgs = unframe(s.body);
    REQUIRE(msgs.size() == 1);
    CHECK(sv_of(msgs[0]) == "echo:" + std::to_string(i));
    CHECK(s.trailer("grpc-status") == "0");
  }
  CHECK(client.server_max_concurrent == 100);
  CHECK(calls().active_calls() == 0);
}

TEST_CASE_FIXTURE(Fixture, "shutdown sends GOAWAY, finishes in-flight calls, then closes") {
  const auto id = client.grpc_call("/test.Echo/Record", frame(sv_bytes("a")), false);
  run();
  session->on_shutdown();
  run();
  CHECK(client.goaway_received);
  CHECK(client.goaway_last_stream == id);
  CHECK(client.goaway_error == 0);
  CHECK_FALSE(session->idle());
  CHECK_FALSE(conn.closed);
  client.send(id, frame(sv_bytes("b")), true);
  run();
  CHECK(client.streams[id].trailer("grpc-status") == "0");
  CHECK(recorded == std::vector<std::string>{"a", "b"});
  CHECK(session->idle());
  CHECK(conn.closed);
  CHECK_FALSE(conn.aborted);
}

TEST_CASE_FIXTURE(Fixture, "handles_deadline: the server times out an incomplete request") {
  const auto id = client.grpc_call("/test.Echo/Self", frame(sv_bytes("x")).substr(0, 4), false,
                                   {{"grpc-timeout", "300000u"}});
  run();
  timers.advance(300'000);
  run();
  CHECK(client.streams[id].grpc_status() == "4");
  CHECK(parked.empty());
}

TEST_CASE_FIXTURE(Fixture, "handles_deadline: after half-close the handler owns the deadline") {
  const auto id =
      client.grpc_call("/test.Echo/Self", frame(sv_bytes("x")), true, {{"grpc-timeout", "1m"}});
  run();
  REQUIRE(parked.size() == 1);
  CHECK(timers.pending.empty());
  CHECK(parked[0].first.deadline_us() == timers.now + 1'000);
  timers.advance(5'000);
  run();
  CHECK_FALSE(client.streams[id].closed);
  StringValue late;
  late.set_value("late but answered");
  parked[0].first.reply(late);
  run();
  CHECK(client.streams[id].trailer("grpc-status") == "0");
}

TEST_CASE("partial messages are bounded per connection, not only per message") {
  Fixture f;
  f.context.options.max_connection_buffered_bytes = 1500;
  // Three client streams each holding 600 bytes of an unfinished 1000-byte message.
  std::vector<std::int32_t> ids;
  const std::string big = frame(std::string(1000, 'x'));
  for (int i = 0; i < 3; ++i) {
    ids.push_back(f.client.grpc_call("/test.Echo/Record", big.substr(0, 605), false));
    f.run();
  }
  CHECK(f.client.streams[ids[0]].grpc_status().empty());
  CHECK(f.client.streams[ids[1]].grpc_status().empty());
  CHECK(f.client.streams[ids[2]].grpc_status() == "8");
  CHECK(f.client.streams[ids[2]].grpc_message() ==
        "connection holds too many partial messages (max 1500 bytes)");
  // Closing a holder frees its share: a new stream fits again.
  f.client.cancel(ids[0]);
  f.run();
  const auto again = f.client.grpc_call("/test.Echo/Record", big.substr(0, 605), false);
  f.run();
  CHECK(f.client.streams[again].grpc_status().empty());
  CHECK(f.calls().active_calls() == 2);
}
