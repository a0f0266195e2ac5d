#include "gateway/endpoints.hh"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>

namespace ic::gateway {

bool is_endpoint(std::string_view id) {
  const std::size_t colon = id.rfind(':');
  if (colon == std::string_view::npos || colon + 1 >= id.size()) return false;
  const std::string_view port = id.substr(colon + 1);
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535)
    return false;
  std::string host(id.substr(0, colon));
  unsigned char buf[16];
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    return inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), buf) == 1;
  }
  return inet_pton(AF_INET, host.c_str(), buf) == 1;
}

EndpointLoad& EndpointLoad::local() {
  thread_local EndpointLoad table;
  return table;
}

EndpointLoad::Figures& EndpointLoad::touch(std::string_view endpoint, std::int64_t now_us) {
  auto it = by_endpoint_.find(std::string(endpoint));
  if (it == by_endpoint_.end()) {
    if (by_endpoint_.size() >= kMaxEndpoints) {
      auto oldest = std::min_element(by_endpoint_.begin(), by_endpoint_.end(),
                                     [](const auto& a, const auto& b) {
                                       return a.second.last_used_us < b.second.last_used_us;
                                     });
      by_endpoint_.erase(oldest);
    }
    it = by_endpoint_.emplace(std::string(endpoint), Figures{}).first;
  }
  it->second.last_used_us = now_us;
  return it->second;
}

void EndpointLoad::started(std::string_view endpoint, std::int64_t now_us) {
  ++touch(endpoint, now_us).in_flight;
}

void EndpointLoad::first_byte(std::string_view endpoint, std::int64_t ttft_us,
                              std::int64_t now_us) {
  Figures& f = touch(endpoint, now_us);
  f.ttft_us = f.ttft_us == 0 ? ttft_us : f.ttft_us + (ttft_us - f.ttft_us) / 8;
}

void EndpointLoad::ended(std::string_view endpoint, std::int64_t now_us) {
  Figures& f = touch(endpoint, now_us);
  if (f.in_flight > 0) --f.in_flight;
}

EndpointLoad::Rank EndpointLoad::rank(std::string_view endpoint) const {
  auto it = by_endpoint_.find(std::string(endpoint));
  if (it == by_endpoint_.end()) return Rank{};
  return Rank{it->second.in_flight, it->second.ttft_us};
}

std::uint32_t EndpointLoad::in_flight(std::string_view endpoint) const {
  auto it = by_endpoint_.find(std::string(endpoint));
  return it == by_endpoint_.end() ? 0 : it->second.in_flight;
}

std::int64_t EndpointLoad::mean_ttft_us(std::string_view endpoint) const {
  auto it = by_endpoint_.find(std::string(endpoint));
  return it == by_endpoint_.end() ? 0 : it->second.ttft_us;
}

std::vector<std::string> EndpointLoad::known() const {
  std::vector<std::string> out;
  out.reserve(by_endpoint_.size());
  for (const auto& [endpoint, figures] : by_endpoint_) out.push_back(endpoint);
  return out;
}

}  // namespace ic::gateway
