#pragma once
// `--templates-file PATH` (docs/templates.md "Two ways in"): the template
// document read from a file at startup, on SIGHUP and whenever the file
// changes (polled like --policy-file, docs/policy.md "Two ways in").

#include <sys/types.h>

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>

#include "templates/template_set.hh"

namespace ic::templates {

// Reads and parses the document at `path` (at most kMaxDocumentBytes).
// Errors name the path ("PATH: No such file or directory",
// "PATH: larger than 1 MiB", "PATH: templates[0]: …").
TemplateParseResult read_templates_file(const std::string& path, std::int32_t default_block_size);

// One --templates-file, polled. Not thread-safe: one core owns it. poll()
// does a stat() and, only when the file's mtime, size or inode changed since
// the last read attempt (good or bad), a read of at most 1 MiB: call it from
// a timer, never per call.
class TemplatesFile {
 public:
  TemplatesFile(std::string path, std::int32_t default_block_size);

  // Reads the file now whatever its identity (startup, SIGHUP).
  TemplateParseResult read();
  // The file's document when it changed since the last attempt; nullopt
  // when unchanged. A missing file is one failed result per disappearance.
  std::optional<TemplateParseResult> poll();

  const std::string& path() const noexcept { return path_; }

 private:
  struct Identity {
    bool exists = false;
    std::timespec mtime{};
    off_t size = 0;
    ino_t inode = 0;
    bool operator==(const Identity& o) const {
      return exists == o.exists && mtime.tv_sec == o.mtime.tv_sec &&
             mtime.tv_nsec == o.mtime.tv_nsec && size == o.size && inode == o.inode;
    }
  };
  Identity identify() const;

  std::string path_;
  std::int32_t default_block_size_;
  bool attempted_ = false;
  Identity attempted_id_;  // the file as it was at the last read attempt
};

}  // namespace ic::templates
