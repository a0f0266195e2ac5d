#include "net/address.hh"

#include <arpa/inet.h>
#include <doctest/doctest.h>

#include <string>

using ic::net::parse_address;

namespace {
std::string error_of(const char* text) {
  std::string why;
  CHECK_FALSE(parse_address(text, &why).has_value());
  return why;
}
std::uint16_t port_of(const ic::net::Address& a) {
  return a.storage.ss_family == AF_INET
             ? ntohs(reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_port)
             : ntohs(reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_port);
}
std::string text_of(const ic::net::Address& a) {
  return ic::net::format_address(reinterpret_cast<const sockaddr*>(&a.storage), a.length);
}
}  // namespace

TEST_SUITE("net") {
  TEST_CASE("address: the forms operators write") {
    auto any = parse_address(":9090", nullptr);
    REQUIRE(any.has_value());
    CHECK(any->any_host);
    CHECK(any->storage.ss_family == AF_INET6);
    CHECK(port_of(*any) == 9090);
    CHECK(text_of(*any) == "[::]:9090");

    auto v4 = parse_address("127.0.0.1:9090", nullptr);
    REQUIRE(v4.has_value());
    CHECK_FALSE(v4->any_host);
    CHECK(v4->length == sizeof(sockaddr_in));
    CHECK(text_of(*v4) == "127.0.0.1:9090");

    auto v6 = parse_address("[::1]:9090", nullptr);
    REQUIRE(v6.has_value());
    CHECK(v6->length == sizeof(sockaddr_in6));
    CHECK(text_of(*v6) == "[::1]:9090");

    auto zero = parse_address("0.0.0.0:0", nullptr);
    REQUIRE(zero.has_value());
    CHECK(text_of(*zero) == "0.0.0.0:0");

    auto local = parse_address("localhost:8080", nullptr);
    REQUIRE(local.has_value());
    CHECK(text_of(*local) == "127.0.0.1:8080");
  }

  TEST_CASE("address: errors say why") {
    CHECK(error_of("9090") == "missing \":port\"");
    CHECK(error_of("127.0.0.1:") == "port must be a number in [0, 65535]");
    CHECK(error_of("127.0.0.1:65536") == "port must be a number in [0, 65535]");
    CHECK(error_of("127.0.0.1:http") == "port must be a number in [0, 65535]");
    CHECK(error_of("[::1:9090") == "IPv6 host must look like [::1]");
    CHECK(error_of("[nope]:9090") == "not an IPv6 address");
    CHECK(error_of("::1:9090") == "IPv6 host must be in brackets, e.g. [::1]:9090");
    CHECK(error_of("example.com:80") == "host must be an IP address, \"localhost\" or empty");
    CHECK(error_of("256.1.1.1:80") == "host must be an IP address, \"localhost\" or empty");
  }
}
