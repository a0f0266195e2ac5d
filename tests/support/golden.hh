#pragma once
// Golden files: expected output kept as data, asserted byte for byte. A test
// folder passes the file's path in with cpp_args (meson.build).

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace ic::itest {

// The bytes of the golden file at `path` without its final newline (editors
// add one; the output it stands for has none). Throws std::runtime_error when
// the file cannot be read, so a moved file fails the test instead of passing
// an empty expectation.
inline std::string read_golden(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read golden file " + path);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  std::string text = bytes.str();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

}  // namespace ic::itest
