#include "admin/auth.hh"
#include "support/temp_dir.hh"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

using ic::admin::AuthDecision;
using ic::admin::TokenAuth;
using ic::metrics::AuthResult;

namespace {
// A token file in a fresh temp dir, removed at scope exit.
struct TempToken {
  ic::test::TempDir dir{"ic-auth"};
  std::string path = dir.file("token");

  // Writes via a new file + rename, as a Secret update does (new inode).
  void write(const std::string& content) const {
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp, std::ios::binary) << content;
    std::rename(tmp.c_str(), path.c_str());
  }
};
}  // namespace

TEST_CASE("bearer outcomes: missing/not Bearer 401, wrong 403, right ok") {
  TempToken file;
  file.write("s3cret\n");
  TokenAuth auth(file.path, false);

  AuthDecision missing = auth.check(std::nullopt);
  CHECK(missing.result == AuthResult::kUnauth);
  CHECK(missing.status == 401);
  CHECK(missing.reason == "missing Authorization header");

  AuthDecision basic = auth.check("Basic czNjcmV0");
  CHECK(basic.result == AuthResult::kUnauth);
  CHECK(basic.status == 401);
  CHECK(basic.reason == "Authorization scheme must be Bearer");
  CHECK(auth.check("Bearer").result == AuthResult::kUnauth);
  CHECK(auth.check("Bearer ").reason == "empty bearer token");

  AuthDecision wrong = auth.check("Bearer s3cre");
  CHECK(wrong.result == AuthResult::kForbidden);
  CHECK(wrong.status == 403);
  CHECK(wrong.reason == "invalid bearer token");
  CHECK(auth.check("Bearer s3cret!").result == AuthResult::kForbidden);

  AuthDecision ok = auth.check("Bearer s3cret");
  CHECK(ok.result == AuthResult::kOk);
  CHECK(ok.status == 200);
  CHECK(auth.check("bearer s3cret").result == AuthResult::kOk);  // scheme is case-insensitive
}

TEST_CASE("a rotated token file is picked up on the next check") {
  TempToken file;
  file.write("old");
  TokenAuth auth(file.path, false);
  CHECK(auth.check("Bearer old").result == AuthResult::kOk);
  file.write("new-token");
  CHECK(auth.check("Bearer old").result == AuthResult::kForbidden);
  CHECK(auth.check("Bearer new-token").result == AuthResult::kOk);
}

TEST_CASE("an unreadable, empty or unconfigured token file is an error (503)") {
  TempToken file;
  TokenAuth missing(file.path, false);
  AuthDecision d = missing.check("Bearer x");
  CHECK(d.result == AuthResult::kError);
  CHECK(d.status == 503);
  CHECK(d.reason == "control token file unreadable or empty");

  file.write("  \n");
  CHECK(missing.check("Bearer x").result == AuthResult::kError);

  TokenAuth none("", false);
  CHECK(none.check("Bearer x").reason == "no control token configured (--control-token-file)");
}

TEST_CASE("--insecure-disable-auth lets everything through as ok") {
  TokenAuth off("", true);
  CHECK(off.check(std::nullopt).result == AuthResult::kOk);
  CHECK(off.check("Basic x").result == AuthResult::kOk);
}

TEST_CASE("SIGHUP's forced reload re-reads a token rewritten in place with the same size/mtime") {
  TempToken file;
  file.write("aaaa");
  TokenAuth auth(file.path, false);
  CHECK(auth.check("Bearer aaaa").result == AuthResult::kOk);
  // Same inode, same size, mtime put back: the stat check alone cannot see the change.
  struct stat before {};
  REQUIRE(::stat(file.path.c_str(), &before) == 0);
  { std::ofstream(file.path, std::ios::binary | std::ios::trunc) << "bbbb"; }
  const timespec times[2] = {before.st_atim, before.st_mtim};
  REQUIRE(::utimensat(AT_FDCWD, file.path.c_str(), times, 0) == 0);
  CHECK(auth.check("Bearer aaaa").result == AuthResult::kOk);
  ic::admin::force_token_reload();
  CHECK(auth.check("Bearer aaaa").result == AuthResult::kForbidden);
  CHECK(auth.check("Bearer bbbb").result == AuthResult::kOk);
}

TEST_CASE("token_file_problem says why a token file is unusable") {
  TempToken file;
  CHECK(ic::admin::token_file_problem(file.path) ==
        "cannot read " + file.path + " (or larger than 64 KiB)");
  file.write(" \n");
  CHECK(ic::admin::token_file_problem(file.path) == file.path + " is empty");
  file.write("t\n");
  CHECK(ic::admin::token_file_problem(file.path) == "");
}
