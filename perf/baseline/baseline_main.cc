// ic-baseline-server: the grpc++ (callback API) InferenceCache baseline that
// perf/compare.sh measures inferencecache-server against. Same index library,
// same tenant→shard partitioning; one index shard per thread, each behind a
// mutex (a grpc++ user's natural choice: grpc++ owns the threads, so a call
// may land on any of them).
#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <CLI/CLI.hpp>

#include "baseline_service.hh"
#include "sharded_index.hh"

namespace {

// CPUs this process may run on (honours taskset), at least 1.
unsigned usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  const int n = CPU_COUNT(&set);
  return n > 0 ? static_cast<unsigned>(n) : 1;
}

// Blocks SIGINT/SIGTERM in every thread (grpc++ threads inherit the mask) so
// main can sigwait() for them and shut down outside a signal handler.
sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "grpc++ callback-API InferenceCache baseline (LookupRoute, ReportCacheState, "
      "RenderTemplate) over the shared index library"};
  std::string listen = "127.0.0.1:9191";
  unsigned threads = 0;
  app.add_option("--listen", listen, "host:port to serve h2c gRPC on");
  app.add_option("--threads", threads,
                 "index shards (tenant-hash partitioned, one mutex each); 0 = usable CPUs");
  CLI11_PARSE(app, argc, argv);
  if (threads == 0) threads = usable_cpus();

  const sigset_t stop_signals = block_stop_signals();

  ic::perf::ShardedIndex index(threads);
  ic::perf::BaselineService service(index);

  grpc::EnableDefaultHealthCheckService(false);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &bound_port);
  builder.SetMaxReceiveMessageSize(4 << 20);  // the contract's 4 MiB receive limit
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) {
    std::fprintf(stderr, "ic-baseline-server: cannot listen on %s\n", listen.c_str());
    return 1;
  }
  // The bound port (not the requested one) so callers can ask for port 0.
  const std::string host = listen.substr(0, listen.rfind(':'));
  std::printf("ic-baseline-server: listening on %s:%d, %u index shards, %u usable CPUs\n",
              host.c_str(), bound_port, threads, usable_cpus());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  // Stop accepting, let in-flight calls finish for up to 2 s, then cancel.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server->Wait();
  return 0;
}
