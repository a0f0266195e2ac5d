#include "nats_process.hh"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "support/server_process.hh"

namespace ic::itest {
namespace {

bool accepts(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

NatsProcess::NatsProcess(std::string store_dir, std::string config_file)
    : store_dir_(std::move(store_dir)),
      config_file_(std::move(config_file)),
      port_(free_loopback_port()) {
  start();
}

NatsProcess::~NatsProcess() { stop(); }

void NatsProcess::start() {
  const char* binary = std::getenv("IC_NATS_SERVER");
  if (binary == nullptr) throw std::runtime_error("IC_NATS_SERVER is not set");
  const std::string port = std::to_string(port_);
  const std::string log = store_dir_ + "/nats.log";
  pid_ = ::fork();
  if (pid_ == 0) {
    if (config_file_.empty()) {
      ::execl(binary, binary, "-js", "-sd", store_dir_.c_str(), "-a", "127.0.0.1", "-p",
              port.c_str(), "-l", log.c_str(), static_cast<char*>(nullptr));
    } else {
      ::execl(binary, binary, "-c", config_file_.c_str(), "-js", "-sd", store_dir_.c_str(), "-a",
              "127.0.0.1", "-p", port.c_str(), "-l", log.c_str(), static_cast<char*>(nullptr));
    }
    ::_exit(127);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!accepts(port_)) {
    if (std::chrono::steady_clock::now() > until) {
      throw std::runtime_error("nats-server not accepting on port " + port);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void NatsProcess::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

}  // namespace ic::itest
