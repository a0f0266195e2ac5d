// ic-perf-subscribers: opens N StreamCacheEvents subscriptions with grpc++
// (no filter) and either never reads them until the end (--mode stuck) or
// reads them continuously (--mode read), for perf/streams/slow_subscriber.sh.
// Prints one line per run: events read and how the streams ended.
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"

namespace pb = inferencecache::v1alpha1;

namespace {

struct Sub {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<pb::CacheEvent>> reader;
  std::uint64_t events = 0;
  grpc::Status status;
};

// Reads `s` to its end (the server ends it, or the context is cancelled).
void drain(Sub& s) {
  pb::CacheEvent e;
  while (s.reader->Read(&e)) ++s.events;
  s.status = s.reader->Finish();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("StreamCacheEvents subscribers for the slow-subscriber benchmark");
  std::string server = "127.0.0.1:9090";
  std::string mode = "stuck";
  int count = 8;
  double seconds = 5;
  app.add_option("--server", server, "gRPC host:port");
  app.add_option("--mode", mode, "stuck: never read until the end; read: read all the time")
      ->check(CLI::IsMember({"stuck", "read"}));
  app.add_option("--subscribers", count, "subscriptions (one channel each)");
  app.add_option("--duration", seconds, "seconds before they are read out / cancelled");
  CLI11_PARSE(app, argc, argv);

  std::vector<std::unique_ptr<Sub>> subs;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < count; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.channel_id", i);  // one connection per subscriber
    channels.push_back(grpc::CreateCustomChannel(server, grpc::InsecureChannelCredentials(), args));
    auto stub = pb::InferenceCache::NewStub(channels.back());
    auto s = std::make_unique<Sub>();
    // A stuck subscriber is read out after the run: the server ended it if it
    // went over its bound; one that stayed within it (the kernel's socket
    // buffers took the rest) ends with DEADLINE_EXCEEDED here.
    s->ctx.set_deadline(std::chrono::system_clock::now() +
                        std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::duration<double>(seconds + 20)));
    s->reader = stub->StreamCacheEvents(&s->ctx, pb::StreamEventsRequest());
    s->reader->WaitForInitialMetadata();
    subs.push_back(std::move(s));
  }
  std::printf("subscribed %d\n", count);
  std::fflush(stdout);
  std::vector<std::thread> readers;
  if (mode == "read") {
    for (auto& s : subs) readers.emplace_back([&s] { drain(*s); });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  if (mode == "stuck") {
    for (auto& s : subs) drain(*s);
  } else {
    for (auto& s : subs) s->ctx.TryCancel();
    for (auto& t : readers) t.join();
  }
  std::map<std::string, int> ends;
  std::uint64_t events = 0;
  for (auto& s : subs) {
    events += s->events;
    ++ends[std::to_string(s->status.error_code()) + ":" + s->status.error_message()];
  }
  std::printf("events read %llu; streams ended:", static_cast<unsigned long long>(events));
  for (const auto& [k, n] : ends) std::printf(" [%d x code %s]", n, k.c_str());
  std::printf("\n");
  return 0;
}
