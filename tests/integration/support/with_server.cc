// with-server: runs a command against a freshly started inferencecache-server.
//
//   with-server SERVER_BINARY [server flags...] -- COMMAND [args...]
//
// Starts the server on free loopback ports (support/server_process.hh), waits
// until the gRPC health check answers SERVING, runs COMMAND with
// IC_GRPC_PORT, IC_HTTP_PORT, IC_SNAPSHOT_PORT and IC_GRPC_TARGET
// ("127.0.0.1:<port>") in its environment, then stops the server with SIGTERM.
// Exit status: COMMAND's when non-zero; else 1 if the server did not exit 0
// (docs/contract.md "Shutdown"); else 0. Used by the node and h2load tests.

#include <spawn.h>
#include <sys/wait.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "support/server_process.hh"
#include "support/text.hh"

extern char** environ;

namespace {

int run_command(std::vector<char*> argv) {
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  if (rc != 0) {
    std::cerr << "with-server: cannot run " << argv[0] << ": " << std::strerror(rc) << "\n";
    return 127;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

}  // namespace

int main(int argc, char** argv) {
  int sep = 1;
  while (sep < argc && std::strcmp(argv[sep], "--") != 0) ++sep;
  if (argc < 2 || sep >= argc - 1) {
    std::cerr << "usage: with-server SERVER_BINARY [server flags...] -- COMMAND [args...]\n";
    return 2;
  }
  ic::itest::ServerOptions options;
  options.binary = argv[1];
  for (int i = 2; i < sep; ++i) options.extra_args.emplace_back(argv[i]);
  try {
    ic::itest::ServerProcess server(options);
    ::setenv("IC_GRPC_PORT", std::to_string(server.grpc_port()).c_str(), 1);
    ::setenv("IC_HTTP_PORT", std::to_string(server.http_port()).c_str(), 1);
    ::setenv("IC_SNAPSHOT_PORT", std::to_string(server.snapshot_port()).c_str(), 1);
    ::setenv("IC_GRPC_TARGET", ic::itest::loopback(server.grpc_port()).c_str(), 1);
    int rc = run_command(std::vector<char*>(argv + sep + 1, argv + argc));
    int server_rc = server.stop();
    if (rc != 0) return rc;
    if (server_rc != 0) {
      std::cerr << "with-server: server exit status " << server_rc << " after SIGTERM (want 0)\n";
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "with-server: " << e.what() << "\n";
    return 1;
  }
}
