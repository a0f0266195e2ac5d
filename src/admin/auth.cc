#include "admin/auth.hh"

#include <openssl/crypto.h>
#include <sys/stat.h>

#include <cctype>
#include <fstream>
#include <sstream>

namespace ic::admin {

namespace {
constexpr std::size_t kMaxTokenFileBytes = 64 * 1024;

std::string_view trim_space(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

AuthDecision deny(metrics::AuthResult result, int status, std::string reason) {
  return AuthDecision{result, status, std::move(reason)};
}
}  // namespace

TokenAuth::TokenAuth(std::string token_file, bool disabled)
    : path_(std::move(token_file)), disabled_(disabled) {}

bool TokenAuth::refresh() {
  if (path_.empty()) return false;
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    loaded_ = false;
    return false;
  }
  if (loaded_ && st.st_mtim.tv_sec == mtime_.tv_sec && st.st_mtim.tv_nsec == mtime_.tv_nsec &&
      st.st_size == size_ && st.st_ino == inode_) {
    return true;
  }
  // A token file is a few bytes of local disk (a mounted Secret): reading it
  // on the reactor costs microseconds and happens only when it changed.
  if (st.st_size < 0 || static_cast<std::size_t>(st.st_size) > kMaxTokenFileBytes) {
    loaded_ = false;
    return false;
  }
  std::ifstream in(path_, std::ios::binary);
  if (!in) {
    loaded_ = false;
    return false;
  }
  std::ostringstream content;
  content << in.rdbuf();
  token_ = std::string(trim_space(content.str()));
  mtime_ = st.st_mtim;
  size_ = st.st_size;
  inode_ = st.st_ino;
  loaded_ = !token_.empty();
  return loaded_;
}

AuthDecision TokenAuth::check(std::optional<std::string_view> authorization) {
  using metrics::AuthResult;
  if (disabled_) return AuthDecision{};
  if (!authorization) {
    return deny(AuthResult::kUnauth, 401, "missing Authorization header");
  }
  const std::string_view value = *authorization;
  const std::size_t space = value.find(' ');
  std::string scheme(value.substr(0, space));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (space == std::string_view::npos || scheme != "bearer") {
    return deny(AuthResult::kUnauth, 401, "Authorization scheme must be Bearer");
  }
  const std::string_view presented = trim_space(value.substr(space + 1));
  if (presented.empty()) return deny(AuthResult::kUnauth, 401, "empty bearer token");
  if (!refresh()) {
    return deny(AuthResult::kError, 503,
                path_.empty() ? "no control token configured (--control-token-file)"
                              : "control token file unreadable or empty");
  }
  const bool same = presented.size() == token_.size() &&
                    CRYPTO_memcmp(presented.data(), token_.data(), token_.size()) == 0;
  if (!same) return deny(AuthResult::kForbidden, 403, "invalid bearer token");
  return AuthDecision{};
}

}  // namespace ic::admin
