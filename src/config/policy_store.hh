#pragma once
// `--policy-file PATH`: the policy snapshot read from a file (a mounted
// ConfigMap) and re-read when it changes (docs/policy.md "Two ways in").

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>

#include "config/policy.hh"

namespace ic::config {

// Polls one policy file. Not thread-safe: one core owns it and broadcasts the
// new PolicySet to every core. poll() does a stat() and, only when the file
// changed, a read of at most 1 MiB: call it from a timer slice, never per call.
class PolicyStore {
 public:
  // Maximum accepted file size in bytes (same limit as POST /policy).
  static constexpr std::size_t kMaxBytes = 1 << 20;

  explicit PolicyStore(std::string path);

  // Initial load. Returns false (and sets last_error()) when the file is
  // missing or invalid; current() then stays the default set.
  bool load();

  // Re-reads the file when its mtime, size or inode changed since the last
  // attempt. Returns true when a NEW valid PolicySet was installed. On error
  // the last good state stays, error_count() grows and last_error() says why.
  bool poll();

  // The last good set (the defaults before any successful load).
  std::shared_ptr<const PolicySet> current() const { return current_; }
  // Number of failed reads/parses since construction.
  std::uint64_t error_count() const noexcept { return errors_; }
  // Number of successful loads since construction.
  std::uint64_t load_count() const noexcept { return loads_; }
  const std::string& last_error() const noexcept { return last_error_; }
  const std::string& path() const noexcept { return path_; }

 private:
  bool read_and_parse();

  std::string path_;
  std::shared_ptr<const PolicySet> current_ = PolicySet::defaults();
  std::uint64_t errors_ = 0;
  std::uint64_t loads_ = 0;
  std::string last_error_;
  // Identity of the file version last attempted (good or bad).
  bool seen_ = false;
  std::timespec mtime_{};
  std::int64_t size_ = -1;
  std::uint64_t inode_ = 0;
};

}  // namespace ic::config
