#pragma once
// Endpoints as the endpoint picker sees them (docs/gateway.md "Endpoints"):
// a replica id of the form ip:port ("10.0.0.7:8000", "[fd00::7]:8000") is an
// endpoint the gateway can send a request to; other replica ids are never
// named in an answer. Per core, the picker keeps what its streams told it
// of each endpoint — requests in flight (picked, response not ended) and the
// time to the first response byte the gateway measured — to order the
// fallbacks and the picks made by load. Bounded: kMaxEndpoints endpoints,
// the least recently used forgotten first.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ic::gateway {

// True for "<IPv4>:<port>" and "[<IPv6>]:<port>" (port 1..65535).
bool is_endpoint(std::string_view replica_id);

class EndpointLoad {
 public:
  static constexpr std::size_t kMaxEndpoints = 4096;

  // A request was sent to `endpoint` (+1 in flight).
  void started(std::string_view endpoint, std::int64_t now_us);
  // Its response began after `ttft_us` µs (an exponential mean, 1/8 weight).
  void first_byte(std::string_view endpoint, std::int64_t ttft_us, std::int64_t now_us);
  // Its response ended or the stream went away (−1 in flight).
  void ended(std::string_view endpoint, std::int64_t now_us);

  // What orders `endpoint` among others (gateway/picker.cc's picks by load):
  // requests in flight, then the mean time to first byte, µs (0 = none measured).
  struct Rank {
    std::uint32_t in_flight = 0;
    std::int64_t ttft_us = 0;
  };
  Rank rank(std::string_view endpoint) const;

  std::uint32_t in_flight(std::string_view endpoint) const;
  // Mean time to first byte, µs; 0 = none measured.
  std::int64_t mean_ttft_us(std::string_view endpoint) const;
  // Endpoints this core has sent requests to, in no order.
  std::vector<std::string> known() const;

  // This core's table.
  static EndpointLoad& local();

 private:
  struct Figures {
    std::uint32_t in_flight = 0;
    std::int64_t ttft_us = 0;
    std::int64_t last_used_us = 0;
  };
  Figures& touch(std::string_view endpoint, std::int64_t now_us);

  std::unordered_map<std::string, Figures> by_endpoint_;
};

}  // namespace ic::gateway
