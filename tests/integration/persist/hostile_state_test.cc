// Hostile state files through the real server (docs/persistence.md "Bounds",
// "One server per file"): whatever sits at --state-file — a directory, a
// FIFO, a symlink to /dev/zero, garbage — starts the server cold at once with
// a reason, and is kept aside rather than replaced by the first save; a
// symlink planted at the old temp name is never written through; a second
// server on the same file is refused (exit 1); SIGTERM during a long load
// stops the server without saving over the file; the restored-entries metric
// counts what the index kept.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../admin/http_client.hh"
#include "inferencecache/v1alpha1/inferencecache.grpc.pb.h"
#include "persist/state_file.hh"
#include "support/builders.hh"
#include "support/grpc_channel.hh"
#include "support/server_process.hh"
#include "support/temp_dir.hh"

namespace pb = inferencecache::v1alpha1;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

ic::itest::ServerOptions options(const std::string& state_file,
                                 std::vector<std::string> more = {}) {
  ic::itest::ServerOptions o;
  o.extra_args = {"--threads",    "2",        "--insecure-disable-auth", "--ranking", "reference",
                  "--state-file", state_file, "--state-save-interval",   "100ms"};
  o.extra_args.insert(o.extra_args.end(), more.begin(), more.end());
  return o;
}

std::string metrics(ic::itest::ServerProcess& s) {
  return ic::itest::http_request(s.http_port(), "GET", "/metrics").body;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Waits until /metrics shows at least one good save.
bool saved(ic::itest::ServerProcess& s) {
  for (int i = 0; i < 200; ++i) {
    if (has(metrics(s), "inferencecache_state_saves_total{result=\"ok\"} ") &&
        !has(metrics(s), "inferencecache_state_saves_total{result=\"ok\"} 0\n"))
      return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The files beside `path` whose names start with its name + `suffix`.
std::vector<fs::path> siblings(const std::string& path, const std::string& suffix) {
  std::vector<fs::path> out;
  const std::string prefix = fs::path(path).filename().string() + suffix;
  for (const auto& e : fs::directory_iterator(fs::path(path).parent_path()))
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  return out;
}

// `plant` puts a `kind` at --state-file; the server must start cold at once.
void check_cold_start(const std::string& kind, void (*plant)(const std::string&)) {
  ic::test::TempDir dir("ic-hostile-state");
  const std::string path = dir.file("state.bin");
  plant(path);
  ic::itest::ServerProcess s(options(path));  // ready within 20 s: nothing blocked or grew
  const std::string m = metrics(s);
  CHECK(has(m, "inferencecache_state_loads_total{result=\"unreadable\"} 1"));
  CHECK(has(m, "inferencecache_state_restored_entries 0"));
  CHECK(s.logged("not a regular file (" + kind + ")"));
  CHECK(s.logged("state file kept aside"));
  // What was there is kept aside, and the saves write a regular file at PATH.
  REQUIRE(siblings(path, ".corrupt-").size() == 1);
  CHECK(saved(s));
  CHECK(s.stop() == 0);
  CHECK(fs::is_regular_file(fs::symlink_status(path)));
  CHECK(ic::persist::read_state_file(path).status == ic::persist::LoadStatus::kOk);
  const fs::file_status kept = fs::symlink_status(siblings(path, ".corrupt-")[0]);
  CHECK((fs::is_directory(kept) || fs::is_fifo(kept) || fs::is_symlink(kept)));
}

TEST_CASE("a directory at --state-file starts the server cold (it used to abort every start)") {
  check_cold_start("directory", [](const std::string& p) { fs::create_directory(p); });
}

TEST_CASE("a FIFO at --state-file starts the server cold at once (it used to block forever)") {
  check_cold_start("FIFO", [](const std::string& p) { REQUIRE(::mkfifo(p.c_str(), 0600) == 0); });
}

TEST_CASE("a symlink to /dev/zero at --state-file starts cold (it used to grow until OOM)") {
  check_cold_start("symbolic link",
                   [](const std::string& p) { fs::create_symlink("/dev/zero", p); });
}

TEST_CASE("a corrupt state file is kept aside, not replaced by the first save") {
  ic::test::TempDir dir("ic-hostile-state");
  const std::string path = dir.file("state.bin");
  std::ofstream(path) << "an operator's file that is not a state file";
  ic::itest::ServerProcess s(options(path));
  CHECK(has(metrics(s), "inferencecache_state_loads_total{result=\"corrupt\"} 1"));
  CHECK(saved(s));
  CHECK(s.stop() == 0);
  const std::vector<fs::path> kept = siblings(path, ".corrupt-");
  REQUIRE(kept.size() == 1);
  CHECK(slurp(kept[0].string()) == "an operator's file that is not a state file");
  CHECK(ic::persist::read_state_file(path).status == ic::persist::LoadStatus::kOk);
}

TEST_CASE("a symlink planted at the temp path the saves used is never written through") {
  ic::test::TempDir dir("ic-hostile-state");
  const std::string path = dir.file("state.bin");
  std::ofstream(dir.file("victim")) << "precious";
  fs::create_symlink(dir.file("victim"), path + ".tmp");
  ic::itest::ServerProcess s(options(path));
  CHECK(saved(s));
  CHECK(s.stop() == 0);
  CHECK(slurp(dir.file("victim")) == "precious");
  CHECK(fs::is_symlink(path + ".tmp"));
  CHECK(ic::persist::read_state_file(path).status == ic::persist::LoadStatus::kOk);
  CHECK(siblings(path, ".tmp-").empty());  // every save's temp file renamed or removed
}

TEST_CASE("a second server on the same --state-file is refused at start (exit 1)") {
  ic::test::TempDir dir("ic-hostile-state");
  const std::string path = dir.file("state.bin");
  ic::itest::ServerProcess first(options(path));
  std::string failure;
  try {
    ic::itest::ServerProcess second(options(path));
    second.stop();
  } catch (const std::runtime_error& e) {
    failure = e.what();
  }
  CHECK(has(failure, "exited with status 1"));
  CHECK(has(failure, "state file in use by another server: not starting"));
  CHECK(has(failure,
            path + ".lock is held by another process (pid " + std::to_string(first.pid()) + ")"));
  CHECK(saved(first));
  CHECK(first.stop() == 0);
  CHECK(ic::persist::read_state_file(path).status == ic::persist::LoadStatus::kOk);
  // Once the first stopped, the path is free again.
  ic::itest::ServerProcess again(options(path));
  CHECK(has(metrics(again), "inferencecache_state_loads_total{result=\"ok\"} 1"));
  CHECK(again.stop() == 0);
}

// A valid state file of `copies` × 16,384 entries (the same 16,384 keys
// again and again, so the load takes time while the index stays small).
void write_long_file(const std::string& path, int copies) {
  ic::persist::state_pb::StateChunk chunk;
  auto* u = chunk.add_updates();
  u->set_tenant_id("tenant-0");
  u->set_model_id("m");
  u->set_hash_scheme("vllm");
  u->set_replica_id("r-a");
  u->set_timestamp_us(ic::test::hour_from_now_us());
  for (std::uint64_t i = 0; i < 16384; ++i) {
    auto* p = u->add_prefixes();
    p->set_prefix_hash(ic::test::block_hash(i + 1));
    p->set_token_count(16);
  }
  const std::string bytes = chunk.SerializeAsString();
  ic::persist::state_pb::StateHeader header;
  header.set_server_version("test");
  std::string error;
  auto w = ic::persist::StateFileWriter::create(path, header, &error);
  REQUIRE_MESSAGE(w != nullptr, error);
  for (int i = 0; i < copies; ++i) REQUIRE(w->append_chunk(bytes));
  REQUIRE(w->commit().empty());
}

// True once /proc says `pid`'s main thread blocks SIGTERM (the server's first step).
bool blocks_sigterm(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("SigBlk:", 0) == 0)
      return (std::stoull(line.substr(7), nullptr, 16) >> (SIGTERM - 1)) & 1;
  }
  return false;
}

TEST_CASE("SIGTERM during a long load stops the server at once, without saving over the file") {
  ic::test::TempDir dir("ic-hostile-state");
  const std::string path = dir.file("state.bin");
  write_long_file(path, 160);  // 2.6 M entries' worth of records, about a second to load
  const std::string before = slurp(path);
  const std::string log = dir.file("server.log");
  std::vector<std::string> args = {ic::itest::server_binary().string(),
                                   "--grpc-bind-address",
                                   "127.0.0.1:" + std::to_string(ic::itest::free_loopback_port()),
                                   "--http-bind-address",
                                   "127.0.0.1:" + std::to_string(ic::itest::free_loopback_port()),
                                   "--snapshot-bind-address",
                                   "127.0.0.1:" + std::to_string(ic::itest::free_loopback_port())};
  for (const std::string& a : options(path, {"--index-max-entries", "4000000"}).extra_args)
    args.push_back(a);
  const pid_t pid = ic::itest::spawn_logged(args, ::open(log.c_str(), O_CREAT | O_WRONLY, 0600));
  while (!blocks_sigterm(pid)) std::this_thread::sleep_for(1ms);
  ::kill(pid, SIGTERM);
  int status = 0;
  const auto sent = std::chrono::steady_clock::now();
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(std::chrono::steady_clock::now() - sent < 5s);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(has(slurp(log), "stopped during start-up: state file load interrupted"));
  CHECK(slurp(path) == before);  // no save of a half-loaded index
}

TEST_CASE("inferencecache_state_restored_entries counts the entries kept, not the file's") {
  ic::test::TempDir dir("ic-hostile-state");
  const std::string path = dir.file("state.bin");
  {
    ic::itest::ServerProcess s(options(path));
    auto stub = pb::InferenceCache::NewStub(ic::itest::insecure_channel(s.grpc_port()));
    pb::Ack ack;
    REQUIRE(ic::itest::report_cache_state(
                *stub, ic::test::two_replica_workload(0, 8, ic::test::hour_from_now_us()), &ack)
                .ok());
    CHECK(s.stop() == 0);
  }
  // 48 entries saved; tenant-0 may now keep one distinct key (of its 4).
  std::ofstream(dir.file("policy.json"))
      << R"({"version":7,"tenants":[{"tenantID":"tenant-0","maxIndexEntries":1}]})";
  ic::itest::ServerProcess s(options(path, {"--policy-file", dir.file("policy.json")}));
  CHECK(s.logged("\"file_entries\":48"));
  CHECK(has(metrics(s), "inferencecache_state_restored_entries 43\n"));
  CHECK(s.stop() == 0);
}

}  // namespace
