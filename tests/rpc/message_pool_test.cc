#include "rpc/message_pool.hh"

#include <doctest/doctest.h>
#include <google/protobuf/field_mask.pb.h>

#include <memory>
#include <string>
#include <vector>

#include "rpc/typed.hh"

using google::protobuf::FieldMask;
using Pool = ic::rpc::MessagePool<FieldMask>;

namespace {

// The wire bytes of a FieldMask with `n` paths of 32 bytes (past std::string's inline buffer).
std::string wire(int n, char fill) {
  FieldMask m;
  for (int i = 0; i < n; ++i) m.add_paths(std::string(32, static_cast<char>(fill + i)));
  return m.SerializeAsString();
}

}  // namespace

TEST_SUITE("rpc") {
  TEST_CASE("message pool: a recycled message comes back cleared, with its strings' storage") {
    Pool pool;
    Pool::Lease m = pool.take();
    REQUIRE(m.message != nullptr);
    const std::string first = wire(3, 'a');
    REQUIRE(m.message->ParseFromString(first));
    const FieldMask* const object = m.message.get();
    const char* const storage = m.message->paths(2).data();
    pool.give(std::move(m), first.size());
    CHECK(pool.pooled() == 1);

    Pool::Lease again = pool.take();
    CHECK(again.message.get() == object);
    CHECK(again.message->paths_size() == 0);
    CHECK(again.absorbed == first.size());
    CHECK(pool.pooled() == 0);
    // The next parse fills the kept strings: no new allocation for them.
    REQUIRE(again.message->ParseFromString(wire(3, 'x')));
    CHECK(again.message->paths(2) == std::string(32, 'z'));
    CHECK(again.message->paths(2).data() == storage);
  }

  TEST_CASE("message pool: a message that parsed more than the bound is freed, not kept") {
    Pool pool;
    pool.give(pool.take(), Pool::kMaxPooledWireBytes + 1);
    CHECK(pool.pooled() == 0);
    pool.give(pool.take(), Pool::kMaxPooledWireBytes);
    CHECK(pool.pooled() == 1);
    pool.give(Pool::Lease{}, 0);
    CHECK(pool.pooled() == 1);
  }

  TEST_CASE("message pool: at most kMaxPooled messages are kept") {
    Pool pool;
    std::vector<Pool::Lease> taken;
    for (std::size_t i = 0; i < Pool::kMaxPooled + 5; ++i) taken.push_back(pool.take());
    for (auto& m : taken) pool.give(std::move(m), 0);
    CHECK(pool.pooled() == Pool::kMaxPooled);
  }

  TEST_CASE(
      "message pool: a unary handler parses into this thread's pool and returns the message") {
    Pool& pool = ic::rpc::message_pool<FieldMask>();
    pool.give(Pool::Lease{std::make_unique<FieldMask>(), 0}, 0);  // one for the handler to take
    const std::size_t before = pool.pooled();
    REQUIRE(before >= 1);
    std::vector<std::string> seen;
    ic::rpc::Method method = ic::rpc::single_request_method<FieldMask>(
        ic::rpc::CallKind::kUnary, [&seen](ic::rpc::CallHandle, FieldMask&& request) {
          seen.assign(request.paths().begin(), request.paths().end());
        });
    const std::string bytes = wire(2, 'k');
    {
      std::unique_ptr<ic::rpc::CallHandler> handler = method.make(ic::rpc::CallHandle{});
      CHECK(pool.pooled() == before - 1);
      handler->on_message(std::as_bytes(std::span(bytes)));
      handler->on_half_close();
    }
    CHECK(seen == std::vector<std::string>{std::string(32, 'k'), std::string(32, 'l')});
    CHECK(pool.pooled() == before);
  }
}
