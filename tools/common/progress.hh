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
  // Redraws at most every 100 ms: "[#####.....]  52%  6256/12031  <note>".
  void update(std::int64_t done, const std::string& note = "");
  // Clears the line so later output starts at column 0.
  void finish();

 private:
  std::int64_t total_;
  bool enabled_;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace ic::tools
