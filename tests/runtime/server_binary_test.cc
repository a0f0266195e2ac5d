// The inferencecache-server binary's command-line and signal contract
// (docs/admin.md "Exit statuses": a refused configuration exits 2, a failed
// start step 1, each with one error line of the log; docs/contract.md:
// SIGTERM / SIGINT drain and exit 0).

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

struct Run {
  int exit_code = -1;
  std::string err;
  std::string out;
};

std::string slurp(int fd) {
  std::string s;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<std::size_t>(n));
  return s;
}

pid_t spawn(const std::vector<std::string>& args, int out_fd, int err_fd) {
  std::vector<char*> argv;
  std::string bin = IC_SERVER_BINARY;
  argv.push_back(bin.data());
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
  pid_t pid = -1;
  posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs the server to completion (it must exit by itself).
Run run_to_exit(const std::vector<std::string>& args) {
  int out[2], err[2];
  REQUIRE(pipe(out) == 0);
  REQUIRE(pipe(err) == 0);
  const pid_t pid = spawn(args, out[1], err[1]);
  ::close(out[1]);
  ::close(err[1]);
  Run r;
  r.out = slurp(out[0]);
  r.err = slurp(err[0]);
  ::close(out[0]);
  ::close(err[0]);
  r.exit_code = wait_exit(pid);
  return r;
}

// `err` as one log line with its timestamp replaced by TS: JSON
// {"ts":"TS",...} or text "TS ERROR ..." (the line's end is kept).
std::string without_ts(const std::string& err) {
  if (err.rfind("{\"ts\":\"", 0) == 0) {
    const std::size_t end = err.find('"', 7);
    return end == std::string::npos ? err : "{\"ts\":\"TS" + err.substr(end);
  }
  const std::size_t space = err.find(' ');
  return space == std::string::npos ? err : "TS" + err.substr(space);
}

const std::vector<std::string> kLoopback = {"--grpc-bind-address",
                                            "127.0.0.1:0",
                                            "--http-bind-address",
                                            "127.0.0.1:0",
                                            "--snapshot-bind-address",
                                            "127.0.0.1:0",
                                            "--threads",
                                            "2",
                                            "--log-format",
                                            "text"};

}  // namespace

TEST_SUITE("runtime") {
  TEST_CASE("binary: a bad flag exits 2 with exactly one error line of the log on stderr") {
    // Its own value is the bad one: the default format, JSON.
    const Run r = run_to_exit({"--log-format", "xml"});
    CHECK(r.exit_code == 2);
    CHECK(without_ts(r.err) ==
          "{\"ts\":\"TS\",\"level\":\"error\",\"msg\":\"bad flag value\",\"error\":\"--log-format: "
          "want json or text, got \\\"xml\\\"\"}\n");
    CHECK(r.out.empty());
    // In the format asked for, wherever the bad flag is.
    const Run text = run_to_exit({"--threads", "many", "--log-format", "text"});
    CHECK(text.exit_code == 2);
    CHECK(without_ts(text.err) ==
          "TS ERROR bad flag value error=--threads: want an integer in [0, 1024], got \"many\"\n");
    CHECK(text.out.empty());
    const Run unknown = run_to_exit({"--log-format", "text", "--no-such-flag"});
    CHECK(unknown.exit_code == 2);
    CHECK(without_ts(unknown.err) ==
          "TS ERROR bad flag value error=unknown flag or argument: --no-such-flag\n");
  }

  TEST_CASE("binary: exactly one of the TLS flags exits 2") {
    const Run r = run_to_exit({"--tls-cert-file", IC_SERVER_BINARY, "--log-format", "text"});
    CHECK(r.exit_code == 2);
    CHECK(without_ts(r.err) ==
          "TS ERROR bad flag value error=--tls-cert-file given without --tls-key-file (both or "
          "neither)\n");
  }

  TEST_CASE("binary: an unparsable listen address exits 2 naming the flag") {
    const Run r = run_to_exit({"--http-bind-address", "8080"});
    CHECK(r.exit_code == 2);
    CHECK(without_ts(r.err) ==
          "{\"ts\":\"TS\",\"level\":\"error\",\"msg\":\"bad flag value\",\"error\":\"--http-bind-"
          "address: invalid address \\\"8080\\\": missing \\\":port\\\"\"}\n");
    const Run text = run_to_exit({"--http-bind-address", "8080", "--log-format", "text"});
    CHECK(text.exit_code == 2);
    CHECK(without_ts(text.err) ==
          "TS ERROR bad flag value error=--http-bind-address: invalid address \"8080\": missing "
          "\":port\"\n");
  }

  TEST_CASE("binary: a TLS certificate that is not one exits 2") {
    const Run r = run_to_exit({"--tls-cert-file", IC_SERVER_BINARY, "--tls-key-file",
                               IC_SERVER_BINARY, "--grpc-bind-address", "127.0.0.1:0"});
    CHECK(r.exit_code == 2);
    // Read after the log is set up: one line of the server's log (JSON by default).
    CHECK(r.err.rfind("{\"ts\":\"", 0) == 0);
    CHECK(r.err.find(
              "\"level\":\"error\",\"msg\":\"bad flag value\",\"error\":\"--tls-cert-file: ") !=
          std::string::npos);
    CHECK(r.err.find('\n') == r.err.size() - 1);
  }

  TEST_CASE("binary: a --nats-creds-file that is missing or not a .creds file exits 2") {
    // Missing: the flag check, one line naming the flag and the path.
    const Run missing = run_to_exit(
        {"--nats-url", "nats://127.0.0.1:1", "--nats-creds-file", "/nonexistent/user.creds"});
    CHECK(missing.exit_code == 2);
    CHECK(without_ts(missing.err) ==
          "{\"ts\":\"TS\",\"level\":\"error\",\"msg\":\"bad flag value\",\"error\":\"--nats-creds-"
          "file: cannot read \\\"/nonexistent/user.creds\\\": No such file or directory\"}\n");
    // Readable but no JWT in it: one log line before NATS is ever called
    // (the NATS client would read it only when connecting, and retry forever).
    const Run garbage = run_to_exit({"--nats-url", "nats://127.0.0.1:1", "--nats-creds-file",
                                     "/etc/hostname", "--grpc-bind-address", "127.0.0.1:0"});
    CHECK(garbage.exit_code == 2);
    CHECK(garbage.err.find(
              "\"level\":\"error\",\"msg\":\"bad flag value\",\"error\":\"--nats-"
              "creds-file: \\\"/etc/hostname\\\": no user JWT in it (not a NATS .creds file)\"") !=
          std::string::npos);
    CHECK(garbage.err.find('\n') == garbage.err.size() - 1);
  }

  TEST_CASE("binary: --insecure-disable-auth with --control-token-file exits 2, one line") {
    const Run r = run_to_exit({"--insecure-disable-auth", "--control-token-file", IC_SERVER_BINARY,
                               "--grpc-bind-address", "127.0.0.1:0"});
    CHECK(r.exit_code == 2);
    CHECK(without_ts(r.err) ==
          "{\"ts\":\"TS\",\"level\":\"error\",\"msg\":\"bad flag value\",\"error\":\"--insecure-"
          "disable-auth and --control-token-file contradict each other (give one)\"}\n");
    CHECK(r.out.empty());
  }

  TEST_CASE("binary: --version exits 0 with version, commit and library versions on stdout") {
    const Run r = run_to_exit({"--version"});
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK(r.out.rfind("inferencecache-server 0.1.0\ncommit: ", 0) == 0);
    CHECK(r.out.find("\nopenssl: ") != std::string::npos);
    CHECK(r.out.back() == '\n');
    CHECK(r.out.find("\n\n") == std::string::npos);
  }

  TEST_CASE("binary: --help exits 0 with usage on stdout") {
    const Run r = run_to_exit({"--help"});
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("--max-connections") != std::string::npos);
  }

  TEST_CASE("binary: SIGTERM and SIGINT stop a serving server with exit 0") {
    for (int sig : {SIGTERM, SIGINT}) {
      CAPTURE(sig);
      int err[2];
      REQUIRE(pipe(err) == 0);
      const int devnull = ::open("/dev/null", O_WRONLY);
      const pid_t pid = spawn(kLoopback, devnull, err[1]);
      ::close(err[1]);
      ::close(devnull);
      // Wait for the "serving" line, then signal.
      std::string log;
      char buf[512];
      while (log.find("serving") == std::string::npos) {
        const ssize_t n = ::read(err[0], buf, sizeof buf);
        if (n <= 0) break;
        log.append(buf, static_cast<std::size_t>(n));
      }
      // The startup line leads with the version (text format: key=value).
      REQUIRE(log.find(" INFO serving version=0.1.0 commit=") != std::string::npos);
      ::kill(pid, sig);
      log += slurp(err[0]);
      ::close(err[0]);
      CHECK(wait_exit(pid) == 0);
      CHECK(log.find(" INFO shutting down signal=") != std::string::npos);
      CHECK(log.find(" INFO stopped exit_code=0") != std::string::npos);
      CHECK(log.find(" tls=false auth=no token file: control requests refused threads=") !=
            std::string::npos);
    }
  }

  TEST_CASE("binary: a port already in use is one error line (JSON or text) and exit 1, no abort") {
    // A socket bound without SO_REUSEPORT: the server's SO_REUSEPORT bind fails.
    const int taken = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(taken >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    REQUIRE(::bind(taken, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::getsockname(taken, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    const std::string address = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
    const std::vector<std::string> args = {
        "--grpc-bind-address",     address,       "--http-bind-address", "127.0.0.1:0",
        "--snapshot-bind-address", "127.0.0.1:0", "--threads",           "2"};
    const Run r = run_to_exit(args);
    std::vector<std::string> text_args = args;
    text_args.insert(text_args.end(), {"--log-format", "text"});
    const Run text = run_to_exit(text_args);
    ::close(taken);
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    CHECK(without_ts(r.err) ==
          "{\"ts\":\"TS\",\"level\":\"error\",\"msg\":\"cannot listen\",\"error\":\"--grpc-bind-"
          "address: bind " +
              address + ": Address already in use\"}\n");
    CHECK(text.exit_code == 1);
    CHECK(text.out.empty());
    CHECK(without_ts(text.err) == "TS ERROR cannot listen error=--grpc-bind-address: bind " +
                                      address + ": Address already in use\n");
  }
}
