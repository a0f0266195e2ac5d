#pragma once
// A private temporary directory for one test, removed with its contents at scope exit.

#include <stdlib.h>

#include <filesystem>
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

}  // namespace ic::test
