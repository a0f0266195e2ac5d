#pragma once
// Bearer-token check of the control listener (docs/admin.md "Listeners":
// /snapshot and /policy are token protected unless --insecure-disable-auth).
// The token lives in `--control-token-file` and is re-read when the file
// changes (a rotated Kubernetes Secret): one stat() per check, a read only
// when mtime, size or inode moved. One instance per core: not thread-safe.

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "metrics/labels.hh"

namespace ic::admin {

struct AuthDecision {
  metrics::AuthResult result = metrics::AuthResult::kOk;
  int status = 200;    // 200 ok, 401 unauth, 403 forbidden, 503 error
  std::string reason;  // empty when ok; else the one-line response body
};

// SIGHUP: every TokenAuth re-reads its file at its next check even if the
// file's mtime, size and inode look unchanged (a token rewritten within one
// mtime tick). Any thread.
void force_token_reload();

// Reads and trims the token in `path` (as TokenAuth does) to report on a
// reload: "" when usable, else why not ("cannot read ...", "empty").
std::string token_file_problem(const std::string& path);

class TokenAuth {
 public:
  // `token_file` empty with auth enabled: every request is refused (error).
  TokenAuth(std::string token_file, bool disabled);

  // Decides on the value of the Authorization header (nullopt: absent).
  // Scheme "Bearer" is case-insensitive (RFC 9110 §11.1); the token is
  // compared in constant time against the file's content with surrounding
  // whitespace (trailing newline) removed. An unreadable or empty token file
  // gives result error / 503: the server cannot decide, so it refuses.
  AuthDecision check(std::optional<std::string_view> authorization);

 private:
  // Re-reads the token when the file changed; false when it cannot be read.
  bool refresh();

  std::string path_;
  bool disabled_;
  std::string token_;
  bool loaded_ = false;
  std::timespec mtime_{};
  std::int64_t size_ = -1;
  std::uint64_t inode_ = 0;
  std::uint64_t generation_ = 0;  // force_token_reload() count at the last read
};

}  // namespace ic::admin
