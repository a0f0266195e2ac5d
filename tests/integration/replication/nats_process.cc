#include "nats_process.hh"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

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

// The log's text from byte `from` on ("" when there is no log yet).
std::string log_from(const std::string& path, std::streamoff from) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(from);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::streamoff log_size(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  return in ? static_cast<std::streamoff>(in.tellg()) : 0;
}

// The port of "Listening for client connections on 127.0.0.1:<port>"; 0 when absent.
std::uint16_t listening_port(const std::string& log) {
  const std::string key = "Listening for client connections on 127.0.0.1:";
  const auto at = log.find(key);
  return at == std::string::npos
             ? 0
             : static_cast<std::uint16_t>(std::atoi(log.c_str() + at + key.size()));
}

}  // namespace

NatsProcess::NatsProcess(std::string store_dir, std::string config_file, bool jetstream)
    : store_dir_(std::move(store_dir)),
      config_file_(std::move(config_file)),
      jetstream_(jetstream) {
  start();
}

NatsProcess::~NatsProcess() { stop(); }

void NatsProcess::start() {
  const char* binary = std::getenv("IC_NATS_SERVER");
  if (binary == nullptr) throw std::runtime_error("IC_NATS_SERVER is not set");
  // The first start lets nats-server pick its port (-1) and reads it from
  // the log: a port picked here and handed over would race with the other
  // tests running at once, and a nats-server that cannot bind exits while
  // the other test's server answers on that port (its servers would then
  // publish into our stream). A restart keeps the port; a nats-server that
  // exits instead of logging "Server is ready" is an error either way.
  const std::string port = port_ == 0 ? "-1" : std::to_string(port_);
  const std::string log = store_dir_ + "/nats.log";
  const std::streamoff log_start = log_size(log);
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
  for (;;) {
    const std::string text = log_from(log, log_start);
    if (text.find("Server is ready") != std::string::npos) {
      port_ = listening_port(text);
      if (port_ != 0 && accepts(port_)) return;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("nats-server exited at start (port " + port + "): " + text);
    }
    if (std::chrono::steady_clock::now() > until) {
      throw std::runtime_error("nats-server not ready on port " + port + ": " + text);
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
