#include "config/policy_store.hh"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace ic::config {

PolicyStore::PolicyStore(std::string path) : path_(std::move(path)) {}

bool PolicyStore::load() {
  seen_ = false;
  return poll();
}

bool PolicyStore::poll() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    // A missing file counts once per disappearance, not once per poll.
    if (seen_ || size_ != -2) {
      ++errors_;
      last_error_ = path_ + ": " + std::strerror(errno);
    }
    seen_ = false;
    size_ = -2;
    return false;
  }
  const bool changed = !seen_ || st.st_mtim.tv_sec != mtime_.tv_sec ||
                       st.st_mtim.tv_nsec != mtime_.tv_nsec || st.st_size != size_ ||
                       static_cast<std::uint64_t>(st.st_ino) != inode_;
  if (!changed) return false;
  seen_ = true;
  mtime_ = st.st_mtim;
  size_ = st.st_size;
  inode_ = static_cast<std::uint64_t>(st.st_ino);
  return read_and_parse();
}

bool PolicyStore::read_and_parse() {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    ++errors_;
    last_error_ = path_ + ": " + std::strerror(errno);
    return false;
  }
  std::string body;
  char buf[16384];
  bool too_big = false;
  bool failed = false;
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      failed = true;
      break;
    }
    if (n == 0) break;
    if (body.size() + static_cast<std::size_t>(n) > kMaxBytes) {
      too_big = true;
      break;
    }
    body.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (failed || too_big) {
    ++errors_;
    last_error_ = path_ + (too_big ? ": larger than 1 MiB" : ": read failed");
    return false;
  }
  PolicyParseResult r = parse_policy_json(body);
  if (!r.ok()) {
    ++errors_;
    last_error_ = path_ + ": " + r.error;
    return false;
  }
  current_ = std::move(r.set);
  ++loads_;
  last_error_.clear();
  return true;
}

}  // namespace ic::config
