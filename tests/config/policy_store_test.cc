// --policy-file: re-read on change, keep the last good state on error.

#include "config/policy_store.hh"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

using namespace ic::config;

namespace {
void write_file(const std::string& path, const std::string& body, long mtime_sec) {
  {
    std::ofstream out(path, std::ios::trunc);
    out << body;
  }
  // Distinct mtimes without sleeping.
  timespec times[2] = {{mtime_sec, 0}, {mtime_sec, 0}};
  REQUIRE(utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}
}  // namespace

TEST_CASE("policy file: load, change, bad file keeps last good, missing file") {
  char dir_template[] = "/tmp/ic-policy-XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  const std::string path = std::string(dir_template) + "/policy.json";
  PolicyStore store(path);

  CHECK_FALSE(store.load());  // missing
  CHECK(store.error_count() == 1);
  CHECK(store.current()->policy_count() == 0);
  CHECK_FALSE(store.poll());  // still missing: counted once
  CHECK(store.error_count() == 1);

  write_file(path, R"({"version":7,"policies":[{"namespace":"a","lookupTimeoutMs":3}]})", 1000);
  CHECK(store.poll());
  CHECK(store.load_count() == 1);
  CHECK(store.current()->policy_for("a").lookup_timeout_ms == 3);
  CHECK(store.last_error().empty());
  CHECK_FALSE(store.poll());  // unchanged: no re-read
  CHECK(store.load_count() == 1);

  write_file(path, R"({"version":9})", 2000);
  CHECK_FALSE(store.poll());
  CHECK(store.error_count() == 2);
  CHECK(store.last_error() == path + ": unsupported version 9 (accepted 3..7)");
  CHECK(store.current()->policy_for("a").lookup_timeout_ms == 3);  // last good kept
  CHECK_FALSE(store.poll());  // the same bad file is not re-counted
  CHECK(store.error_count() == 2);

  write_file(path, R"({"version":7,"policies":[{"namespace":"a","lookupTimeoutMs":4}]})", 3000);
  CHECK(store.poll());
  CHECK(store.current()->policy_for("a").lookup_timeout_ms == 4);
  CHECK(store.load_count() == 2);

  unlink(path.c_str());
  rmdir(dir_template);
}
