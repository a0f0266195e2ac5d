#pragma once
// One server per --state-file (docs/persistence.md "One server per file"):
// an exclusive flock(2) on "PATH.lock", held for the process's life, so a
// second server started on the same path is refused at start instead of
// tearing the file with its own saves.

#include <cstddef>
#include <memory>
#include <string>

namespace ic::persist {

class StateLock {
 public:
  // Opens (creates, mode 0600, no symlink followed) "PATH.lock" and takes an
  // exclusive non-blocking flock on it, then writes this process's pid into
  // it. nullptr with *error set when another process holds it ("held by
  // another process (pid 1234)") or the lock file cannot be opened.
  static std::unique_ptr<StateLock> acquire(const std::string& path, std::string* error);
  ~StateLock();  // closes the lock file: the lock is released
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;

  // Removes the temp files ("PATH.tmp-*", regular files only) of saves that a
  // kill interrupted; only this lock's holder writes them. Returns how many.
  std::size_t remove_stale_temps() const;

 private:
  StateLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

// "PATH.lock".
std::string lock_path(const std::string& path);

}  // namespace ic::persist
