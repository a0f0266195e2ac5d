// NATS credentials files (replication/nats_creds.hh).

#include "replication/nats_creds.hh"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace ic::replication {

namespace {

constexpr const char* kFlag = "--nats-creds-file";

std::string failed(const std::string& path, const std::string& why) {
  return std::string(kFlag) + ": \"" + path + "\": " + why;
}

// The file's bytes, at most kMaxCredsFileBytes; a FIFO or device is refused
// before it is read (O_NONBLOCK, fstat).
std::string read_small_file(const std::string& path, std::string* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    *error = failed(path, std::strerror(errno));
    return {};
  }
  std::string bytes;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *error = failed(path, "not a regular file");
  } else if (static_cast<std::uint64_t>(st.st_size) > kMaxCredsFileBytes) {
    *error = failed(path, "larger than " + std::to_string(kMaxCredsFileBytes) + " bytes");
  } else {
    bytes.resize(static_cast<std::size_t>(st.st_size));
    const ssize_t got = ::read(fd, bytes.data(), bytes.size());
    if (got < 0) *error = failed(path, std::strerror(errno));
    bytes.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  }
  ::close(fd);
  return bytes;
}

}  // namespace

std::string check_creds_file(const std::string& path) {
  std::string error;
  const std::string bytes = read_small_file(path, &error);
  if (!error.empty()) return error;
  bool jwt = false, seed = false;
  std::istringstream lines(bytes);
  for (std::string line; std::getline(lines, line);) {
    jwt = jwt || line.rfind("eyJ", 0) == 0;
    seed = seed || line.rfind("SU", 0) == 0;
  }
  if (!jwt) return failed(path, "no user JWT in it (not a NATS .creds file)");
  if (!seed) return failed(path, "no user NKey seed in it (not a NATS .creds file)");
  return {};
}

std::string apply_creds(natsOptions* options, const std::string& path) {
  const natsStatus s = natsOptions_SetUserCredentialsFromFiles(options, path.c_str(), nullptr);
  if (s == NATS_OK) return {};
  std::string text = natsStatus_GetText(s);
  if (const char* last = nats_GetLastError(nullptr); last != nullptr && *last != '\0') {
    text += ": ";
    text += last;
  }
  return failed(path, text);
}

}  // namespace ic::replication
