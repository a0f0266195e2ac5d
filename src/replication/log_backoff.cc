#include "replication/log_backoff.hh"

#include <algorithm>

namespace ic::replication {

bool LogBackoff::allow(std::int64_t now_us, std::uint64_t* suppressed, std::int64_t* next_in_us) {
  const std::lock_guard lock(mutex_);
  if (wait_us_ != 0 && now_us < next_us_) {
    ++suppressed_;
    return false;
  }
  const bool quiet = wait_us_ == 0 || now_us >= next_us_ + wait_us_;
  wait_us_ = quiet ? first_us_ : std::min(wait_us_ * 2, max_us_);
  next_us_ = now_us + wait_us_;
  *suppressed = suppressed_;
  suppressed_ = 0;
  if (next_in_us != nullptr) *next_in_us = wait_us_;
  return true;
}

void LogBackoff::restart() {
  const std::lock_guard lock(mutex_);
  wait_us_ = 0;
  next_us_ = 0;
  suppressed_ = 0;
}

}  // namespace ic::replication
