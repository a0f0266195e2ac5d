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
#include <vector>

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

NatsProcess::NatsProcess(std::string store_dir, std::string config_file, bool jetstream)
    : store_dir_(std::move(store_dir)),
      config_file_(std::move(config_file)),
      port_(free_loopback_port()),
      jetstream_(jetstream) {
  start();
}

NatsProcess::~NatsProcess() { stop(); }

void NatsProcess::start() {
  const char* binary = std::getenv("IC_NATS_SERVER");
  if (binary == nullptr) throw std::runtime_error("IC_NATS_SERVER is not set");
  const std::string port = std::to_string(port_);
  const std::string log = store_dir_ + "/nats.log";
  // argv is built before fork: the child of a multi-threaded test only execs.
  std::vector<const char*> argv{binary};
  if (!config_file_.empty()) argv.insert(argv.end(), {"-c", config_file_.c_str()});
  if (jetstream_) argv.insert(argv.end(), {"-js", "-sd", store_dir_.c_str()});
  argv.insert(argv.end(), {"-a", "127.0.0.1", "-p", port.c_str(), "-l", log.c_str(), nullptr});
  pid_ = ::fork();
  if (pid_ == 0) {
    ::execv(binary, const_cast<char* const*>(argv.data()));
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
