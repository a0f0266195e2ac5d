// The state file container (src/persist/state_file.hh): exact layout, and
// every truncation and every single-byte corruption of a file refused.

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "persist/state_file.hh"
#include "support/temp_dir.hh"
#include "xxhash.h"

namespace ic::persist {
namespace {

using ic::test::TempDir;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

state_pb::StateHeader header() {
  state_pb::StateHeader h;
  h.set_server_version("9.9.9");
  h.set_created_at_us(1'700'000'000'000'000);
  h.set_policy_json(R"({"version":7})");
  return h;
}

// Writes a file with chunks "abc" and "" and returns its bytes.
std::string write_sample(const std::string& path) {
  std::string error;
  auto w = StateFileWriter::create(path, header(), &error);
  REQUIRE(w != nullptr);
  REQUIRE(w->append_chunk("abc"));
  REQUIRE(w->append_chunk(""));
  REQUIRE(w->commit().empty());
  return slurp(path);
}

TEST_CASE("a state file round-trips its header and chunks, with the documented layout") {
  TempDir dir("ic-state");
  const std::string path = dir.file("state.bin");
  const std::string bytes = write_sample(path);
  const std::size_t header_len = header().SerializeAsString().size();
  // magic 8 + version 4 + (5 + header) + (5 + 3) + (5 + 0) + trailer 9
  CHECK(bytes.size() == 12 + 5 + header_len + 8 + 5 + 9);
  CHECK(bytes.substr(0, 12) == std::string("ICSTATE\0\2\0\0\0", 12));
  CHECK(bytes[12] == '\1');
  CHECK(bytes[bytes.size() - 9] == '\xFF');
  CHECK(std::filesystem::directory_iterator(dir.path) != std::filesystem::directory_iterator());
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path),
                      std::filesystem::directory_iterator()) == 1);

  const StateFileContents c = read_state_file(path);
  REQUIRE(c.status == LoadStatus::kOk);
  CHECK(c.header.server_version() == "9.9.9");
  CHECK(c.header.created_at_us() == 1'700'000'000'000'000);
  CHECK(c.header.policy_json() == R"({"version":7})");
  REQUIRE(c.chunks.size() == 2);
  CHECK(c.chunks[0] == "abc");
  CHECK(c.chunks[1] == "");
}

// The sample state file's bytes, and what read_state_file makes of other bytes.
struct Sample {
  TempDir dir{"ic-state"};
  const std::string bytes = write_sample(dir.file("full.bin"));
  StateFileContents read(const std::string& other) const {
    const std::string path = dir.file("other.bin");
    spit(path, other);
    return read_state_file(path);
  }
};

TEST_CASE("every truncation of a state file is refused") {
  const Sample sample;
  for (std::size_t len = 0; len < sample.bytes.size(); ++len) {
    CAPTURE(len);
    const StateFileContents c = sample.read(sample.bytes.substr(0, len));
    CHECK((c.status == LoadStatus::kTruncated || c.status == LoadStatus::kCorrupt));
    CHECK_FALSE(c.error.empty());
    CHECK(c.chunks.empty());
  }
  CHECK(sample.read(sample.bytes.substr(0, 5)).status == LoadStatus::kTruncated);
  CHECK(sample.read(sample.bytes.substr(0, sample.bytes.size() - 1)).status ==
        LoadStatus::kTruncated);
}

TEST_CASE("every single-byte corruption of a state file is refused") {
  const Sample sample;
  for (std::size_t i = 0; i < sample.bytes.size(); ++i) {
    CAPTURE(i);
    std::string b = sample.bytes;
    b[i] = static_cast<char>(b[i] ^ 0x01);
    const StateFileContents c = sample.read(b);
    CHECK(c.status != LoadStatus::kOk);
    if (i < 8) CHECK(c.status == LoadStatus::kCorrupt);
    if (i >= 8 && i < 12) CHECK(c.status == LoadStatus::kWrongVersion);
  }
}

TEST_CASE("a version-1 file (the previous build's, checksum valid) is refused as wrong_version") {
  // Version 1 had the same layout but no replication stream position in its
  // header (docs/persistence.md "Versions"): the bytes the previous build
  // wrote for this sample, i.e. this build's with version 1 and its checksum.
  TempDir dir("ic-state");
  std::string bytes = write_sample(dir.file("v2.bin"));
  REQUIRE(bytes.substr(8, 4) == std::string("\x02\0\0\0", 4));
  bytes[8] = '\x01';
  const std::size_t end = bytes.size() - 8;
  const std::uint64_t sum = XXH3_64bits(bytes.data(), end);
  for (int i = 0; i < 8; ++i) bytes[end + i] = static_cast<char>(sum >> (8 * i));
  spit(dir.file("v1.bin"), bytes);
  const StateFileContents old = read_state_file(dir.file("v1.bin"));
  CHECK(old.status == LoadStatus::kWrongVersion);
  CHECK(old.error == "format version 1, this build reads 2");
  CHECK(old.chunks.empty());
}

TEST_CASE("a file of another format version is refused by name; a missing one is kMissing") {
  TempDir dir("ic-state");
  std::string bytes = write_sample(dir.file("v.bin"));
  bytes[8] = '\0';  // format version 0: an earlier build's
  spit(dir.file("old.bin"), bytes);
  const StateFileContents old = read_state_file(dir.file("old.bin"));
  CHECK(old.status == LoadStatus::kWrongVersion);
  CHECK(old.error == "format version 0, this build reads 2");
  CHECK(load_status_name(old.status) == "wrong_version");

  const StateFileContents none = read_state_file(dir.file("absent.bin"));
  CHECK(none.status == LoadStatus::kMissing);
  CHECK(load_status_name(none.status) == "missing");

  spit(dir.file("text.bin"), "hello, this is not a state file");
  CHECK(read_state_file(dir.file("text.bin")).status == LoadStatus::kCorrupt);
}

TEST_CASE("an uncommitted writer leaves neither the file nor its temp file") {
  TempDir dir("ic-state");
  const std::string path = dir.file("state.bin");
  std::string tmp;
  {
    std::string error;
    auto w = StateFileWriter::create(path, header(), &error);
    REQUIRE(w != nullptr);
    CHECK(w->append_chunk("x"));
    tmp = w->temp_path();
    CHECK(std::filesystem::exists(tmp));
  }
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_FALSE(std::filesystem::exists(tmp));

  // A failed save leaves the previous file as it was.
  const std::string before = write_sample(path);
  {
    std::string error;
    auto w = StateFileWriter::create(path, header(), &error);
    REQUIRE(w != nullptr);
  }
  CHECK(slurp(path) == before);

  std::string error;
  CHECK(StateFileWriter::create(dir.file("no/such/dir/state.bin"), header(), &error) == nullptr);
  CHECK(error ==
        "create " + dir.file("no/such/dir/state.bin.tmp-XXXXXX") + ": No such file or directory");
}

}  // namespace
}  // namespace ic::persist
