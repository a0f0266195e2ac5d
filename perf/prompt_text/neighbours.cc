// ic-perf-prompt-neighbours: does a tenant sending hostile prompt_text cost
// other tenants' LookupRoute latency? (docs/prompt-text.md "Where it runs and
// its bounds"; perf/prompt_text/neighbours.sh starts the server.)
//
// Alternates quiet and attacked windows of --seconds each (--pairs pairs).
// A neighbour (tenant "neighbour", one channel, closed loop) sends token_ids
// lookups all the time; in an attacked window --attackers threads of a
// child process (tenant "attacker", one channel each, closed loop) send
// LookupRoute with a prompt_text of --kind:
//   word      one 1,000,000-byte word ("a" repeated)
//   spaces    1,000,000 spaces
//   newlines  1,000,000 newlines
//   words60k  16 words of 60,000 bytes (under the 64 KiB pre-token bound)
//   english   1,000,000 bytes of English-like prose (tokenizes in full)
// Prints per window the neighbour's calls, p50/p99/max (µs), and for attacked
// windows the attackers' calls, their p50 (µs), reason codes, and the
// server's CPU ms per attacker call (--server-pid: its utime + stime over the
// window, all of it charged to the attackers, an upper bound). The attacking
// threads run at SCHED_IDLE (--attackers-idle, as tests/hostile does): on a
// shared 2-CPU box their own serialization of 1 MB messages would otherwise
// take the CPU from the neighbour client rather than from the server.
#include <grpcpp/grpcpp.h>

#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"

namespace pb = inferencecache::v1alpha1;
using Clock = std::chrono::steady_clock;

namespace {

std::string prompt_of(const std::string& kind) {
  if (kind == "word") return std::string(1'000'000, 'a');
  if (kind == "spaces") return std::string(1'000'000, ' ');
  if (kind == "newlines") return std::string(1'000'000, '\n');
  if (kind == "words60k") {
    std::string s;
    for (int i = 0; i < 16; ++i) s += std::string(60'000, static_cast<char>('a' + i)) + " ";
    return s;
  }
  static const char* kWords[] = {"the",     "cache", "replica", "prefix", "of",
                                 "and",     "token", "latency", "is",     "a",
                                 "gateway", "route", "model",   "to"};
  std::mt19937 rng(7);
  std::string s;
  while (s.size() < 1'000'000) {
    s += kWords[rng() % std::size(kWords)];
    s += (rng() % 12 == 0) ? ". " : " ";
  }
  s.resize(1'000'000);
  return s;
}

// Server CPU (utime + stime) in ms, or -1.
double server_cpu_ms(int pid) {
  if (pid <= 0) return -1;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  return (utime + stime) * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::int64_t pct(std::vector<std::int64_t>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(static_cast<double>(v.size()) * p))];
}

std::shared_ptr<grpc::Channel> channel(const std::string& server, int id) {
  grpc::ChannelArguments args;
  args.SetInt("grpc.channel_id", id);  // one connection each
  args.SetMaxSendMessageSize(8 << 20);
  return grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args);
}

// The attacking process: `attackers` threads (one channel each) sending
// `prompt` while the last command read from `commands` was '1'; on '0' one
// line "calls p50_us reason=count ..." goes to `reports`; EOF ends it.
int run_attackers(const std::string& server, const std::string& model, const std::string& prompt,
                  int attackers, bool idle, int commands, int reports) {
  std::atomic<bool> attacking{false}, done{false};
  std::mutex mu;
  std::vector<std::int64_t> lat;
  std::map<std::string, int> reasons;
  std::vector<std::thread> threads;
  for (int a = 0; a < attackers; ++a) {
    threads.emplace_back([&, a] {
      if (idle) {  // the attackers' CPU is not the server's to protect
        sched_param none{};
        pthread_setschedparam(pthread_self(), SCHED_IDLE, &none);
      }
      auto stub = pb::InferenceCache::NewStub(channel(server, 100 + a));
      pb::LookupRouteRequest req;
      req.set_model_id(model);
      req.set_tenant_id("attacker");
      req.set_prompt_text(prompt);
      while (!done) {
        if (!attacking) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          continue;
        }
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
        pb::LookupRouteResponse resp;
        const auto t0 = Clock::now();
        const grpc::Status st = stub->LookupRoute(&ctx, req, &resp);
        const auto us =
            std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
        std::lock_guard lock(mu);
        if (!attacking) continue;
        lat.push_back(us);
        ++reasons[st.ok() ? resp.reason_code() + (resp.token_ids_size() > 0 ? "+tokens" : "")
                          : "grpc:" + std::to_string(st.error_code())];
      }
    });
  }
  char c = 0;
  while (read(commands, &c, 1) == 1) {
    if (c == '1') {
      std::lock_guard lock(mu);
      lat.clear();
      reasons.clear();
      attacking = true;
      continue;
    }
    std::lock_guard lock(mu);
    attacking = false;
    std::string line = std::to_string(lat.size()) + " " + std::to_string(pct(lat, 0.5));
    for (const auto& [r, n] : reasons) line += " " + r + "=" + std::to_string(n);
    line += "\n";
    if (write(reports, line.data(), line.size()) < 0) break;
  }
  done = true;
  for (auto& t : threads) t.join();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("neighbour LookupRoute latency under hostile prompt_text");
  std::string server = "127.0.0.1:9090", kind = "word", model = "qwen3";
  int attackers = 8, pairs = 3, pid = 0;
  bool idle = true;
  double seconds = 5;
  app.add_option("--server", server, "gRPC host:port");
  app.add_option("--kind", kind, "the attackers' prompt_text")
      ->check(CLI::IsMember({"word", "spaces", "newlines", "words60k", "english"}));
  app.add_option("--model", model, "model_id with a tokenizer on the server");
  app.add_option("--attackers", attackers, "attacking threads (one channel each)");
  app.add_option("--pairs", pairs, "quiet + attacked window pairs");
  app.add_option("--seconds", seconds, "seconds per window");
  app.add_option("--server-pid", pid, "server pid for its CPU time");
  app.add_option("--attackers-idle", idle, "run the attacking threads at SCHED_IDLE");
  CLI11_PARSE(app, argc, argv);

  // The attackers run in a child process (forked before any grpc++ object
  // exists): grpc++ threads shared with the neighbour would otherwise make
  // the client, not the server, the bottleneck. Commands over a pipe: '1'
  // attack, '0' stop and report one line back.
  int to_child[2], from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) return 1;
  const pid_t child = fork();
  if (child == 0) {
    close(to_child[1]);
    close(from_child[0]);
    return run_attackers(server, model, prompt_of(kind), attackers, idle, to_child[0],
                         from_child[1]);
  }
  close(to_child[0]);
  close(from_child[1]);
  FILE* reports = fdopen(from_child[0], "r");
  auto stub = pb::InferenceCache::NewStub(channel(server, 1));
  pb::LookupRouteRequest nreq;
  nreq.set_model_id(model);
  nreq.set_tenant_id("neighbour");
  for (std::uint32_t t = 0; t < 64; ++t) nreq.add_token_ids(t);
  std::printf("kind %s, %d attackers, %.1f s windows\n", kind.c_str(), attackers, seconds);
  std::printf("%-8s %8s %8s %8s %8s | %8s %9s %9s  %s\n", "window", "calls", "p50_us", "p99_us",
              "max_us", "atk", "atk_p50", "cpu_ms", "attacker reasons");
  for (int w = 0; w < 2 * pairs; ++w) {
    const bool attacked = w % 2 == 1;
    if (attacked && write(to_child[1], "1", 1) != 1) return 1;
    const double cpu0 = server_cpu_ms(pid);
    std::vector<std::int64_t> lat;
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
      grpc::ClientContext ctx;
      pb::LookupRouteResponse resp;
      const auto t0 = Clock::now();
      stub->LookupRoute(&ctx, nreq, &resp);
      lat.push_back(
          std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count());
    }
    const double cpu = server_cpu_ms(pid) - cpu0;
    char report[4096] = "0 0";
    if (attacked) {
      if (write(to_child[1], "0", 1) != 1 || std::fgets(report, sizeof report, reports) == nullptr)
        return 1;
    }
    std::size_t atk = 0;
    long long atk_p50 = 0;
    int used = 0;
    std::sscanf(report, "%zu %lld %n", &atk, &atk_p50, &used);
    std::string rs = report + used;
    if (!rs.empty() && rs.back() == '\n') rs.pop_back();
    const std::size_t calls = lat.size();
    const std::int64_t p50 = pct(lat, 0.5), p99 = pct(lat, 0.99), mx = pct(lat, 1.0);
    std::printf("%-8s %8zu %8lld %8lld %8lld | %8zu %9lld %9.1f  %s\n",
                attacked ? "attacked" : "quiet", calls, static_cast<long long>(p50),
                static_cast<long long>(p99), static_cast<long long>(mx), atk, atk_p50,
                attacked && atk > 0 && pid > 0 ? cpu / static_cast<double>(atk) : 0.0, rs.c_str());
    std::fflush(stdout);
    if (attacked) std::this_thread::sleep_for(std::chrono::milliseconds(300));  // calls drain
  }
  close(to_child[1]);  // the child sees EOF and exits
  int status = 0;
  waitpid(child, &status, 0);
  return 0;
}
