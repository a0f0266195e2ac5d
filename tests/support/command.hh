#pragma once
// Runs a shell command and returns what it wrote to stdout (popen(3)).

#include <stdio.h>

#include <stdexcept>
#include <string>

namespace ic::test {

// stdout of `/bin/sh -c cmd`, whole. Throws std::runtime_error when the
// command cannot start or exits non-zero (the message names the command).
inline std::string command_output(const std::string& cmd) {
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run: " + cmd);
  std::string out;
  char buf[1 << 16];
  for (std::size_t n; (n = ::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  if (::pclose(pipe) != 0) throw std::runtime_error("failed: " + cmd);
  return out;
}

}  // namespace ic::test
