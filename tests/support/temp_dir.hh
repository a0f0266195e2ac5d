#pragma once
// A private temporary directory for one test, removed with its contents at scope exit.

#include <stdlib.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace ic::test {

struct TempDir {
  // Creates <temp dir>/<prefix>-XXXXXX (mkdtemp: mode 0700, a fresh name).
  // Throws std::runtime_error when it cannot.
  explicit TempDir(const std::string& prefix = "ic-test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // The path of `name` inside the directory.
  std::string file(const std::string& name) const { return (path / name).string(); }

  std::filesystem::path path;
};

// Writes `text` to a fresh file <temp dir>/<prefix>-XXXXXX (mkstemp, mode 0600) and
// returns its path; the caller removes it. Throws std::runtime_error when it cannot.
inline std::string write_temp_file(const std::string& prefix, const std::string& text) {
  std::string path = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  const int fd = ::mkstemp(path.data());
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  ::close(fd);
  std::ofstream(path) << text;
  return path;
}

}  // namespace ic::test
