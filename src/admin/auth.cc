#include "admin/auth.hh"

#include <openssl/crypto.h>
#include <sys/stat.h>

#include <atomic>
#include <cctype>
#include <fstream>
#include <optional>

namespace ic::admin {

namespace {
constexpr std::size_t kMaxTokenFileBytes = 64 * 1024;

std::string_view trim_space(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

std::atomic<std::uint64_t> g_reload_generation{0};

// The token in `path`, trimmed; nullopt when unreadable or too large.
std::optional<std::string> read_token(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string content(kMaxTokenFileBytes + 1, '\0');
  in.read(content.data(), static_cast<std::streamsize>(content.size()));
  content.resize(static_cast<std::size_t>(in.gcount()));
  if (content.size() > kMaxTokenFileBytes) return std::nullopt;
  return std::string(trim_space(content));
}

AuthDecision deny(metrics::AuthResult result, int status, std::string reason) {
  return AuthDecision{result, status, std::move(reason)};
}
}  // namespace

void force_token_reload() { g_reload_generation.fetch_add(1, std::memory_order_relaxed); }

std::string token_file_problem(const std::string& path) {
  const std::optional<std::string> token = read_token(path);
  if (!token) return "cannot read " + path + " (or larger than 64 KiB)";
  if (token->empty()) return path + " is empty";
  return {};
}

TokenAuth::TokenAuth(std::string token_file, bool disabled)
    : path_(std::move(token_file)), disabled_(disabled) {}

bool TokenAuth::refresh() {
  if (path_.empty()) return false;
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    loaded_ = false;
    return false;
  }
  const std::uint64_t generation = g_reload_generation.load(std::memory_order_relaxed);
  if (loaded_ && generation == generation_ && st.st_mtim.tv_sec == mtime_.tv_sec &&
      st.st_mtim.tv_nsec == mtime_.tv_nsec && st.st_size == size_ && st.st_ino == inode_) {
    return true;
  }
  // A token file is a few bytes of local disk (a mounted Secret): reading it
  // on the reactor costs microseconds and happens only when it changed.
  if (st.st_size < 0 || static_cast<std::size_t>(st.st_size) > kMaxTokenFileBytes) {
    loaded_ = false;
    return false;
  }
  std::optional<std::string> token = read_token(path_);
  if (!token) {
    loaded_ = false;
    return false;
  }
  token_ = std::move(*token);
  generation_ = generation;
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
