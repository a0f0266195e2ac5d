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
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  std::fprintf(stderr, "\r[%s] %3d%%  %lld/%lld  %s  %s\033[K", bar.c_str(),
               static_cast<int>(100 * done / total_), static_cast<long long>(done),
               static_cast<long long>(total_), progress_figures(done, total_, elapsed).c_str(),
               note.c_str());
  std::fflush(stderr);
}

namespace {
std::string duration_text(double seconds) {
  const long long s = static_cast<long long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm%02llds", s / 3600, s / 60 % 60, s % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%llds", s);
  }
  return buf;
}
}  // namespace

std::string progress_figures(std::int64_t done, std::int64_t total, double elapsed_s) {
  std::string out = duration_text(elapsed_s) + " elapsed  ";
  if (done <= 0 || elapsed_s <= 0) return out + "0/s  ETA ?";
  const double rate = static_cast<double>(done) / elapsed_s;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f/s", rate);
  out += buf;
  out += "  ETA ";
  out += duration_text(static_cast<double>(total > done ? total - done : 0) / rate);
  return out;
}

void ProgressBar::finish() {
  if (!enabled_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

}  // namespace ic::tools
