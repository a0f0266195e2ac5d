// A one-line progress bar on stderr, drawn only when stderr is a terminal (isatty), so
// logs and pipes stay clean.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ic::tools {

class ProgressBar {
 public:
  // `total` units of work; `enabled` false (or stderr not a tty) makes every call a no-op.
  ProgressBar(std::int64_t total, bool enabled);
  // Redraws at most every 100 ms:
  // "[#####.....]  52%  6256/12031  12s elapsed  521/s  ETA 11s  <note>".
  void update(std::int64_t done, const std::string& note = "");
  // Clears the line so later output starts at column 0.
  void finish();

 private:
  std::int64_t total_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_draw_{};
};

// The figures after the bar: elapsed time, rate and the time left at that rate, e.g.
// "12s elapsed  521/s  ETA 11s" ("ETA ?" before anything was done). Seconds as "1h02m03s",
// "4m05s" or "7s".
std::string progress_figures(std::int64_t done, std::int64_t total, double elapsed_s);

}  // namespace ic::tools
