#include "rpc/timeout.hh"

namespace ic::rpc {

std::optional<std::int64_t> parse_grpc_timeout_us(std::string_view value) {
  constexpr std::size_t kMaxDigits = 8;
  if (value.size() < 2 || value.size() > kMaxDigits + 1) return std::nullopt;
  std::int64_t amount = 0;
  for (const char c : value.substr(0, value.size() - 1)) {
    if (c < '0' || c > '9') return std::nullopt;
    amount = amount * 10 + (c - '0');
  }
  // 99,999,999 H = 3.6e17 µs: every product below fits in int64.
  switch (value.back()) {
    case 'H':
      return amount * 3'600'000'000LL;
    case 'M':
      return amount * 60'000'000LL;
    case 'S':
      return amount * 1'000'000LL;
    case 'm':
      return amount * 1'000LL;
    case 'u':
      return amount;
    case 'n':
      return (amount + 999) / 1000;
    default:
      return std::nullopt;
  }
}

}  // namespace ic::rpc
