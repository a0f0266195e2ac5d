#include "adapter_process.hh"

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "kvevents/engine_stats.hh"
#include "support/server_process.hh"
#include "support/text.hh"

extern char** environ;

namespace ic::tools::kvevents::test {
namespace {

std::string binary() {
  const char* path = std::getenv("IC_KVEVENTS_BINARY");
  if (path == nullptr) throw std::runtime_error("IC_KVEVENTS_BINARY is not set");
  return path;
}

}  // namespace

AdapterProcess::AdapterProcess(std::vector<std::string> extra) {
  http_port_ = itest::free_loopback_port();
  std::string tmpl = (std::filesystem::temp_directory_path() / "ic-kvevents-XXXXXX.log").string();
  const int log_fd = ::mkstemps(tmpl.data(), 4);
  if (log_fd < 0) throw std::runtime_error(std::string("mkstemps: ") + std::strerror(errno));
  log_path_ = tmpl;
  std::vector<std::string> args = {binary(), "--http-bind-address", itest::loopback(http_port_),
                                   "--log-format", "text"};
  args.insert(args.end(), extra.begin(), extra.end());
  pid_ = itest::spawn_logged(std::move(args), log_fd);
  if (!wait_metric("inferencecache_kvevents_snapshots_total", "", 1)) {
    throw std::runtime_error("inferencecache-kvevents did not connect in time:\n" + log());
  }
}

AdapterProcess::~AdapterProcess() {
  const int status = stop();
  if (status != 0) {
    std::cerr << "--- inferencecache-kvevents log (exit status " << status << ") ---\n"
              << log() << "--- end of log ---\n";
  }
  std::filesystem::remove(log_path_);
}

int AdapterProcess::stop() {
  if (exited_ || pid_ <= 0) return exit_status_;
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  exited_ = true;
  exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return exit_status_;
}

std::string AdapterProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int AdapterProcess::http_status(const std::string& path) const {
  httplib::Client client("127.0.0.1", http_port_);
  client.set_connection_timeout(2, 0);
  const auto res = client.Get(path);
  return res ? res->status : 0;
}

std::optional<double> AdapterProcess::metric(const std::string& name,
                                             const std::string& labels) const {
  httplib::Client client("127.0.0.1", http_port_);
  client.set_connection_timeout(2, 0);
  client.set_read_timeout(5, 0);
  const auto res = client.Get("/metrics");
  if (!res || res->status != 200) return std::nullopt;
  for (const Sample& s : parse_exposition(res->body)) {
    if (s.name != name) continue;
    std::string have;
    for (const auto& [k, v] : s.labels) have += (have.empty() ? "" : ",") + k + "=\"" + v + "\"";
    if (have == labels) return s.value;
  }
  return std::nullopt;
}

bool AdapterProcess::wait_metric(const std::string& name, const std::string& labels,
                                 double at_least, std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto v = metric(name, labels);
    if (v && *v >= at_least) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return false;
}

}  // namespace ic::tools::kvevents::test
