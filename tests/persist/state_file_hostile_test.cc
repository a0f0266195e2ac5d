// Hostile state files (docs/persistence.md "Bounds"): whatever sits at PATH —
// a directory, a FIFO, a device, a symlink, an oversized or forged file — is
// refused at once with a reason and read no further; the temp file of a save
// is never an existing name; a second holder of PATH's lock is refused; a
// file that did not load can be kept aside.

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "persist/state_file.hh"
#include "persist/state_lock.hh"
#include "support/temp_dir.hh"

namespace ic::persist {
namespace {

using ic::test::TempDir;
namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

state_pb::StateHeader header(const std::string& version) {
  state_pb::StateHeader h;
  h.set_server_version(version);
  return h;
}

// Commits a state file at `path` with one chunk `chunk`.
void write_file(const std::string& path, const std::string& version, const std::string& chunk) {
  std::string error;
  auto w = StateFileWriter::create(path, header(version), &error);
  REQUIRE_MESSAGE(w != nullptr, error);
  REQUIRE(w->append_chunk(chunk));
  REQUIRE(w->commit().empty());
}

TEST_CASE("a directory, a FIFO, a device or a symlink at PATH is refused unread, by kind") {
  TempDir dir("ic-hostile-state");
  fs::create_directory(dir.file("dir"));
  REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0600) == 0);
  fs::create_symlink("/dev/zero", dir.file("zero-link"));
  write_file(dir.file("good"), "1", "abc");
  fs::create_symlink(dir.file("good"), dir.file("good-link"));
  struct Case {
    std::string path;
    std::string error;
  };
  const Case cases[] = {
      {dir.file("dir"), dir.file("dir") + ": not a regular file (directory)"},
      {dir.file("fifo"), dir.file("fifo") + ": not a regular file (FIFO)"},
      {"/dev/zero", "/dev/zero: not a regular file (character device)"},
      {dir.file("zero-link"), dir.file("zero-link") + ": not a regular file (symbolic link)"},
      {dir.file("good-link"), dir.file("good-link") + ": not a regular file (symbolic link)"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.path);
    const auto started = std::chrono::steady_clock::now();
    const StateFileContents got = read_state_file(c.path);
    CHECK(got.status == LoadStatus::kUnreadable);
    CHECK(got.error == c.error);
    CHECK(got.chunks.empty());
    // Nothing was read: no blocking open of the FIFO, no read of /dev/zero.
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
  }
  CHECK(read_state_file(dir.file("good")).status == LoadStatus::kOk);
}

TEST_CASE("a file over the size limit is refused before its first byte is read") {
  TempDir dir("ic-hostile-state");
  write_file(dir.file("state.bin"), "1", std::string(1000, 'x'));
  const auto size = fs::file_size(dir.file("state.bin"));
  CHECK(read_state_file(dir.file("state.bin"), size).status == LoadStatus::kOk);
  const StateFileContents over = read_state_file(dir.file("state.bin"), size - 1);
  CHECK(over.status == LoadStatus::kUnreadable);
  CHECK(over.error == dir.file("state.bin") + ": " + std::to_string(size) +
                          " bytes, over the limit of " + std::to_string(size - 1));
  CHECK(state_file_limit(1'000'000) == (64u << 20) + 256'000'000u);
}

TEST_CASE("a forged record length is refused before anything of that size is allocated") {
  // magic, version 2, then a header record that claims 4 GiB - 1.
  const std::string forged = std::string("ICSTATE\0\2\0\0\0", 12) + "\x01\xff\xff\xff\xff" + "x";
  const StateFileContents got = parse_state_bytes(forged);
  CHECK(got.status == LoadStatus::kCorrupt);
  CHECK(got.error == "record of 4294967295 bytes, over 67108864");
  // Bytes after a valid trailer are not ignored.
  TempDir dir("ic-hostile-state");
  write_file(dir.file("state.bin"), "1", "abc");
  const std::string tail = slurp(dir.file("state.bin")) + "junk";
  CHECK(parse_state_bytes(tail).error == "bytes after the trailer");
}

TEST_CASE("a save writes a fresh temp name: a symlink planted at PATH.tmp is never followed") {
  TempDir dir("ic-hostile-state");
  const std::string path = dir.file("state.bin");
  spit(dir.file("victim"), "precious");
  fs::create_symlink(dir.file("victim"), path + ".tmp");
  std::string error;
  auto a = StateFileWriter::create(path, header("a"), &error);
  auto b = StateFileWriter::create(path, header("b"), &error);
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(a->temp_path() != b->temp_path());
  CHECK(a->temp_path().rfind(path + ".tmp-", 0) == 0);
  CHECK(a->temp_path().size() == path.size() + 11);  // ".tmp-" + 6 random characters
  // Two writers on one PATH (two servers, or two saves) interleave without
  // tearing: each commits a whole file.
  REQUIRE(a->append_chunk(std::string(100'000, 'a')));
  REQUIRE(b->append_chunk(std::string(100'000, 'b')));
  REQUIRE(a->commit().empty());
  CHECK(read_state_file(path).header.server_version() == "a");
  REQUIRE(b->commit().empty());
  const StateFileContents last = read_state_file(path);
  REQUIRE(last.status == LoadStatus::kOk);
  CHECK(last.header.server_version() == "b");
  CHECK(last.chunks.at(0) == std::string(100'000, 'b'));
  CHECK(slurp(dir.file("victim")) == "precious");
  CHECK(fs::is_symlink(path + ".tmp"));
}

TEST_CASE("the lock on PATH is exclusive: a second holder is refused with the first's pid") {
  TempDir dir("ic-hostile-state");
  const std::string path = dir.file("state.bin");
  std::string error;
  {
    auto first = StateLock::acquire(path, &error);
    REQUIRE_MESSAGE(first != nullptr, error);
    auto second = StateLock::acquire(path, &error);
    CHECK(second == nullptr);
    CHECK(error ==
          path + ".lock is held by another process (pid " + std::to_string(::getpid()) + ")");
  }
  // Released with its holder (and by the kernel when a holder dies).
  CHECK(StateLock::acquire(path, &error) != nullptr);
}

TEST_CASE("the lock's holder removes leftover temp files of interrupted saves, nothing else") {
  TempDir dir("ic-hostile-state");
  const std::string path = dir.file("state.bin");
  spit(path + ".tmp-a1b2c3", "left by kill -9");
  spit(path + ".tmp-zzzzzz", "left by kill -9");
  spit(dir.file("victim"), "precious");
  fs::create_symlink(dir.file("victim"), path + ".tmp-link00");
  fs::create_directory(path + ".tmp-dir000");
  spit(path, "the state file");
  spit(dir.file("other.bin.tmp-a1b2c3"), "another path's");
  std::string error;
  auto lock = StateLock::acquire(path, &error);
  REQUIRE(lock != nullptr);
  CHECK(lock->remove_stale_temps() == 2);
  CHECK_FALSE(fs::exists(path + ".tmp-a1b2c3"));
  CHECK_FALSE(fs::exists(path + ".tmp-zzzzzz"));
  CHECK(fs::is_symlink(path + ".tmp-link00"));
  CHECK(fs::is_directory(path + ".tmp-dir000"));
  CHECK(slurp(path) == "the state file");
  CHECK(slurp(dir.file("other.bin.tmp-a1b2c3")) == "another path's");
  CHECK(slurp(dir.file("victim")) == "precious");
}

TEST_CASE("keep_aside renames whatever is at PATH to PATH.corrupt-<unix seconds>") {
  TempDir dir("ic-hostile-state");
  const std::string path = dir.file("state.bin");
  spit(path, "garbage");
  CHECK(kept_aside_path(path, 1'700'000'000) == path + ".corrupt-1700000000");
  CHECK(keep_aside(path, 1'700'000'000).empty());
  CHECK_FALSE(fs::exists(path));
  CHECK(slurp(path + ".corrupt-1700000000") == "garbage");
  fs::create_directory(path);
  CHECK(keep_aside(path, 1'700'000'001).empty());
  CHECK(fs::is_directory(path + ".corrupt-1700000001"));
  CHECK(keep_aside(path, 1'700'000'002) ==
        "rename " + path + " to " + path + ".corrupt-1700000002: No such file or directory");
}

}  // namespace
}  // namespace ic::persist
