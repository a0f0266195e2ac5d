// --templates-file polled like --policy-file (docs/templates.md "Two ways
// in"): read at start, re-read when the file changes (mtime, size, inode),
// not when it does not; a bad or missing file is reported once per version.

#include "templates/template_file.hh"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

#include "fixture.hh"
#include "support/temp_dir.hh"

using ic::templates::TemplatesFile;
using ic::templates::test::document;

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

TEST_CASE("templates file: read, changed, unchanged, bad keeps nothing new, missing once") {
  ic::test::TempDir dir("ic-templates-file");
  const std::string path = dir.file("templates.json");
  const std::string one = document("a", "Hello {{ x }}", {{"x", "string", "volatile"}});
  const std::string two = document("b", "Bye {{ x }}", {{"x", "string", "volatile"}});
  write_file(path, one, 1000);
  TemplatesFile file(path, 16);

  ic::templates::TemplateParseResult first = file.read();
  REQUIRE_MESSAGE(first.ok(), first.error);
  CHECK(first.set->source_json() == one);
  CHECK_FALSE(file.poll().has_value());  // unchanged since the read

  write_file(path, two, 2000);
  std::optional<ic::templates::TemplateParseResult> changed = file.poll();
  REQUIRE(changed.has_value());
  REQUIRE(changed->ok());
  CHECK(changed->set->source_json() == two);
  CHECK(changed->set->find("team-a", "b") != nullptr);
  CHECK_FALSE(file.poll().has_value());

  // A bad version: an error naming the path, the file's last result.
  write_file(path, "{\"version\":1,\"templates\":[]", 3000);
  std::optional<ic::templates::TemplateParseResult> bad = file.poll();
  REQUIRE(bad.has_value());
  CHECK_FALSE(bad->ok());
  CHECK(bad->error.rfind(path + ": ", 0) == 0);
  CHECK_FALSE(file.poll().has_value());  // the same bad version: reported once

  REQUIRE(std::remove(path.c_str()) == 0);
  std::optional<ic::templates::TemplateParseResult> missing = file.poll();
  REQUIRE(missing.has_value());
  CHECK(missing->error == path + ": No such file or directory");
  CHECK_FALSE(file.poll().has_value());  // still missing: once per disappearance

  write_file(path, one, 4000);
  std::optional<ic::templates::TemplateParseResult> back = file.poll();
  REQUIRE(back.has_value());
  REQUIRE(back->ok());
  CHECK(back->set->source_json() == one);

  // SIGHUP: read whatever the identity says.
  CHECK(file.read().ok());
}
