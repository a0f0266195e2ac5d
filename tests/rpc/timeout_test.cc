#include "rpc/timeout.hh"

#include <doctest/doctest.h>

#include <optional>
#include <string_view>

using ic::rpc::parse_grpc_timeout_us;

TEST_CASE("grpc-timeout units convert to µs") {
  struct Row {
    std::string_view in;
    std::int64_t us;
  };
  const Row rows[] = {
      {"1H", 3'600'000'000LL},
      {"2M", 120'000'000LL},
      {"1S", 1'000'000LL},
      {"100m", 100'000LL},
      {"5u", 5LL},
      {"0n", 0LL},
      {"1n", 1LL},
      {"1000n", 1LL},
      {"1001n", 2LL},
      {"0S", 0LL},
      {"00000001S", 1'000'000LL},
      {"99999999H", 359'999'996'400'000'000LL},
      {"99999999n", 100'000LL},
  };
  for (const auto& r : rows) {
    CAPTURE(r.in);
    const auto got = parse_grpc_timeout_us(r.in);
    REQUIRE(got.has_value());
    CHECK(*got == r.us);
  }
}

TEST_CASE("malformed grpc-timeout values are rejected") {
  const std::string_view bad[] = {"",    "S",   "1",   "123456789S", "1s",   "1h", "1x",   "-1S",
                                  "+1S", " 1S", "1 S", "1SS",        "1.5S", "S1", "0x1S", "１S"};
  for (auto v : bad) {
    CAPTURE(v);
    CHECK(parse_grpc_timeout_us(v) == std::nullopt);
  }
}
