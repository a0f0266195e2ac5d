// One server per --state-file: the lock file and the leftover temp files
// (persist/state_lock.hh).

#include "persist/state_lock.hh"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "persist/state_file.hh"

namespace ic::persist {

namespace {

// The pid a holder wrote into the lock file ("" when none could be read).
std::string holder_pid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return {};
  std::string pid(buf, static_cast<std::size_t>(n));
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid;
}

}  // namespace

std::string lock_path(const std::string& path) { return path + ".lock"; }

std::unique_ptr<StateLock> StateLock::acquire(const std::string& path, std::string* error) {
  const std::string lock = lock_path(path);
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
  if (fd < 0) {
    *error = "open " + lock + ": " + std::strerror(errno);
    return nullptr;
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      const std::string pid = holder_pid(fd);
      *error = lock + " is held by another process" + (pid.empty() ? "" : " (pid " + pid + ")");
    } else {
      *error = "flock " + lock + ": " + std::strerror(err);
    }
    ::close(fd);
    return nullptr;
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The lock holds without the pid; it only improves the refusal's message.
  }
  return std::unique_ptr<StateLock>(new StateLock(path, fd));
}

StateLock::~StateLock() { ::close(fd_); }

std::size_t StateLock::remove_stale_temps() const {
  const std::filesystem::path prefix(temp_prefix(path_));
  const std::string name_prefix = prefix.filename().string();
  std::filesystem::path dir = prefix.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  std::size_t removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(name_prefix, 0) != 0) continue;
    std::error_code kind_ec;
    if (!entry.is_regular_file(kind_ec) || entry.is_symlink(kind_ec)) continue;
    if (std::filesystem::remove(entry.path(), kind_ec)) ++removed;
  }
  return removed;
}

}  // namespace ic::persist
