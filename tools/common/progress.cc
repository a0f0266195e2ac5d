#include "common/progress.hh"

#include <unistd.h>

#include <cstdio>

namespace ic::tools {

ProgressBar::ProgressBar(std::int64_t total, bool enabled)
    : total_(total > 0 ? total : 1), enabled_(enabled && isatty(STDERR_FILENO) == 1) {}

void ProgressBar::update(std::int64_t done, const std::string& note) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / total_);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.append(static_cast<std::size_t>(kWidth - filled), '.');
  std::fprintf(stderr, "\r[%s] %3d%%  %lld/%lld  %s\033[K", bar.c_str(),
               static_cast<int>(100 * done / total_), static_cast<long long>(done),
               static_cast<long long>(total_), note.c_str());
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (!enabled_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

}  // namespace ic::tools
