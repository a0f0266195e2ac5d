#include "support/server_process.hh"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "grpc/health/v1/health.pb.h"
#include "support/grpc_frame.hh"
#include "support/h2_client.hh"
#include "support/text.hh"

extern char** environ;

namespace ic::itest {

std::filesystem::path server_binary() {
  const char* p = std::getenv("IC_SERVER_BINARY");
  if (p == nullptr || *p == '\0') {
    throw std::runtime_error("IC_SERVER_BINARY is not set (meson sets it for integration tests)");
  }
  return p;
}

bool server_sanitized() {
  const char* s = std::getenv("IC_SANITIZED");
  return s != nullptr && std::string_view(s) == "1";
}

uint16_t free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    throw std::runtime_error(std::string("bind 127.0.0.1:0: ") + std::strerror(err));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool health_serving(uint16_t grpc_port, std::chrono::milliseconds timeout) {
  try {
    H2Client client(grpc_port);
    grpc::health::v1::HealthCheckRequest req;  // service "" = the whole server
    int32_t id = client.start(kHealthCheckPath, BodyPlan{frame_message(req)});
    if (!client.run_until([&] { return client.response(id).done(); }, timeout)) return false;
    const H2Response& r = client.response(id);
    if (r.grpc_status() != kOk) return false;
    auto answer = parse_single<grpc::health::v1::HealthCheckResponse>(r.body);
    return answer.status() == grpc::health::v1::HealthCheckResponse::SERVING;
  } catch (const std::exception&) {
    return false;  // not listening yet, or an answer that is not SERVING yet
  }
}

ServerProcess::ServerProcess(ServerOptions options) {
  if (options.binary.empty()) options.binary = server_binary();
  std::string failures;
  for (int attempt = 0; attempt < 3; ++attempt) {
    // A sanitizer build starts (and catches a replication stream up) 2-3x
    // slower: its wait is 3x, as meson's --timeout-multiplier 3 in CI.
    const auto timeout = options.ready_timeout * (server_sanitized() ? 3 : 1);
    if (launch(options) && wait_ready(timeout, options.ready_when_logged)) return;
    failures += numbered("attempt ", attempt + 1) + ": " +
                (exited_ ? numbered("exited with status ", exit_status_)
                         : std::string("not SERVING in time")) +
                "\n--- server log ---\n" + log() + "\n";
    std::filesystem::remove(log_path_);
    if (!exited_) {
      // Running but not SERVING: fresh ports would not help.
      ::kill(pid_, SIGKILL);
      wait_exit(std::chrono::seconds(10));
      break;
    }
  }
  throw std::runtime_error("inferencecache-server did not become ready:\n" + failures);
}

bool ServerProcess::launch(const ServerOptions& options) {
  grpc_port_ = options.grpc_port != 0 ? options.grpc_port : free_loopback_port();
  http_port_ = free_loopback_port();
  snapshot_port_ = free_loopback_port();
  exited_ = false;
  exit_status_ = -1;

  std::string tmpl = (std::filesystem::temp_directory_path() / "ic-server-XXXXXX.log").string();
  int log_fd = ::mkstemps(tmpl.data(), 4);
  if (log_fd < 0) throw std::runtime_error(std::string("mkstemps: ") + std::strerror(errno));
  log_path_ = tmpl;

  std::vector<std::string> args = options.wrapper;
  args.insert(args.end(),
              {options.binary.string(), "--grpc-bind-address", loopback(grpc_port_),
               "--http-bind-address", loopback(http_port_), "--snapshot-bind-address",
               options.snapshot_on_all_interfaces ? "0.0.0.0:" + std::to_string(snapshot_port_)
                                                  : loopback(snapshot_port_)});
  // `meson test --setup epoll` runs every server on epoll (IC_REACTOR_BACKEND),
  // unless the test names a backend itself.
  const char* backend = std::getenv("IC_REACTOR_BACKEND");
  const auto& extra = options.extra_args;
  if (backend != nullptr && *backend != '\0' &&
      std::find(extra.begin(), extra.end(), "--reactor-backend") == extra.end()) {
    args.insert(args.end(), {"--reactor-backend", backend});
  }
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  pid_ = spawn_logged(std::move(args), log_fd);
  return true;
}

pid_t spawn_logged(std::vector<std::string> args, int log_fd) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, log_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, log_fd, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(log_fd);
  if (rc != 0) throw std::runtime_error("posix_spawn " + args[0] + ": " + std::strerror(rc));
  return pid;
}

bool ServerProcess::wait_ready(std::chrono::milliseconds timeout,
                               const std::string& ready_when_logged) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!running()) return false;
    if (!ready_when_logged.empty()) {
      if (log().find(ready_when_logged) != std::string::npos) return true;
    } else if (health_serving(grpc_port_, std::chrono::seconds(2))) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

ServerProcess::~ServerProcess() {
  bool clean = exited_ && exit_status_ == 0;
  if (!exited_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    wait_exit(std::chrono::seconds(10));
  }
  if (!clean && !log_path_.empty()) {
    std::cerr << "--- inferencecache-server log (pid " << pid_ << ", grpc port " << grpc_port_
              << ", exit status " << exit_status_ << ") ---\n"
              << log() << "--- end of server log ---\n";
  }
  if (!log_path_.empty()) std::filesystem::remove(log_path_);
}

void ServerProcess::signal(int sig) {
  if (!exited_) ::kill(pid_, sig);
}

bool ServerProcess::running() {
  if (exited_) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == 0) return true;
  exited_ = true;
  if (r < 0) {
    exit_status_ = -1;
  } else if (WIFEXITED(status)) {
    exit_status_ = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit_status_ = 128 + WTERMSIG(status);
  }
  return false;
}

int ServerProcess::wait_exit(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return exit_status_;
}

int ServerProcess::stop(std::chrono::milliseconds grace) {
  signal(SIGTERM);
  return wait_exit(grace);
}

std::string ServerProcess::log() const {
  std::ifstream in(log_path_, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool ServerProcess::logged(const std::string& text, int times,
                           std::chrono::milliseconds within) const {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string all = log();
    int n = 0;
    for (std::size_t at = all.find(text); at != std::string::npos; at = all.find(text, at + 1)) ++n;
    if (n >= times) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace ic::itest
