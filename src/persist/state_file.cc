// State file container: framing, checksum and the atomic replace
// (docs/persistence.md "File format").

#include "persist/state_file.hh"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace ic::persist {

namespace {

constexpr char kMagic[8] = {'I', 'C', 'S', 'T', 'A', 'T', 'E', '\0'};
constexpr std::uint8_t kHeaderRecord = 1;
constexpr std::uint8_t kChunkRecord = 2;
constexpr std::uint8_t kTrailer = 0xFF;

std::uint64_t load_le(const char* p, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

void store_le(char* p, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

constexpr const char* kTempInfix = ".tmp-";
constexpr std::size_t kReadBuffer = 1u << 20;

// "directory", "FIFO", ... for the log line of a refused PATH.
const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "directory";
  if (S_ISFIFO(mode)) return "FIFO";
  if (S_ISCHR(mode)) return "character device";
  if (S_ISBLK(mode)) return "block device";
  if (S_ISSOCK(mode)) return "socket";
  if (S_ISLNK(mode)) return "symbolic link";
  return "special file";
}

StateFileContents failed(StateFileContents c, LoadStatus status, std::string error) {
  c.status = status;
  c.error = std::move(error);
  c.chunks.clear();
  return c;
}

// Every chunk of an opened reader, kept; anything but a verified end keeps none.
StateFileContents collect(StateFileReader& reader) {
  StateFileContents c;
  if (reader.status() != LoadStatus::kOk)
    return failed(std::move(c), reader.status(), reader.error());
  c.header = reader.header();
  std::string body;
  while (reader.next_chunk(&body)) c.chunks.push_back(body);
  if (reader.status() != LoadStatus::kOk)
    return failed(std::move(c), reader.status(), reader.error());
  c.status = LoadStatus::kOk;
  return c;
}

}  // namespace

std::string_view load_status_name(LoadStatus status) {
  constexpr std::array<std::string_view, 6> kNames = {
      "ok", "missing", "unreadable", "wrong_version", "truncated", "corrupt"};
  static_assert(kNames.size() == static_cast<std::size_t>(LoadStatus::kCorrupt) + 1);
  return kNames[static_cast<std::size_t>(status)];
}

std::uint64_t state_file_limit(std::uint64_t max_entries) {
  return (std::uint64_t{64} << 20) + 256 * max_entries;
}

std::unique_ptr<StateFileReader> StateFileReader::open(const std::string& path,
                                                       std::uint64_t max_file_bytes) {
  std::unique_ptr<StateFileReader> r(new StateFileReader());
  r->fd_ = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (r->fd_ < 0) {
    const int err = errno;
    if (err == ELOOP) {
      r->fail(LoadStatus::kUnreadable, path + ": not a regular file (symbolic link)");
    } else {
      r->fail(err == ENOENT ? LoadStatus::kMissing : LoadStatus::kUnreadable,
              path + ": " + std::strerror(err));
    }
    return r;
  }
  struct stat st {};
  if (::fstat(r->fd_, &st) != 0) {
    r->fail(LoadStatus::kUnreadable, path + ": " + std::strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    r->fail(LoadStatus::kUnreadable, path + ": not a regular file (" + file_kind(st.st_mode) + ")");
  } else if (static_cast<std::uint64_t>(st.st_size) > max_file_bytes) {
    r->fail(LoadStatus::kUnreadable, path + ": " + std::to_string(st.st_size) +
                                         " bytes, over the limit of " +
                                         std::to_string(max_file_bytes));
  } else {
    r->buffer_.resize(kReadBuffer);
    r->read_preamble();
  }
  return r;
}

std::unique_ptr<StateFileReader> StateFileReader::over(std::string_view bytes) {
  std::unique_ptr<StateFileReader> r(new StateFileReader());
  r->memory_ = bytes;
  r->read_preamble();
  return r;
}

StateFileReader::~StateFileReader() {
  if (fd_ >= 0) ::close(fd_);
  if (hash_state_ != nullptr) XXH3_freeState(static_cast<XXH3_state_t*>(hash_state_));
}

bool StateFileReader::fail(LoadStatus status, std::string error) {
  if (status_ == LoadStatus::kOk) {
    status_ = status;
    error_ = std::move(error);
  }
  ended_ = true;
  return false;
}

// Reads exactly n bytes (hashed unless told otherwise); false at the end of
// the bytes (status untouched: the caller names what was cut) or on an error.
bool StateFileReader::read_exact(void* dst, std::size_t n, bool hashed) {
  auto* out = static_cast<char*>(dst);
  std::size_t got = 0;
  if (fd_ < 0) {
    if (memory_.size() - memory_pos_ < n) return false;
    std::memcpy(out, memory_.data() + memory_pos_, n);
    memory_pos_ += n;
    got = n;
  }
  while (got < n) {
    if (buffer_pos_ == buffer_len_) {
      const ssize_t r = ::read(fd_, buffer_.data(), buffer_.size());
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return fail(LoadStatus::kUnreadable, std::string("read: ") + std::strerror(errno));
      if (r == 0) return false;
      buffer_pos_ = 0;
      buffer_len_ = static_cast<std::size_t>(r);
    }
    const std::size_t take = std::min(n - got, buffer_len_ - buffer_pos_);
    std::memcpy(out + got, buffer_.data() + buffer_pos_, take);
    buffer_pos_ += take;
    got += take;
  }
  if (hashed) XXH3_64bits_update(static_cast<XXH3_state_t*>(hash_state_), out, n);
  return true;
}

bool StateFileReader::at_eof() {
  if (fd_ < 0) return memory_pos_ == memory_.size();
  char extra = 0;
  return !read_exact(&extra, 1, false) && status_ == LoadStatus::kOk;
}

bool StateFileReader::read_preamble() {
  if (hash_state_ == nullptr) hash_state_ = XXH3_createState();
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(hash_state_));
  char magic[sizeof(kMagic)];
  if (!read_exact(magic, sizeof(magic)))
    return fail(LoadStatus::kTruncated, "not a state file (bad magic)");
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0)
    return fail(LoadStatus::kCorrupt, "not a state file (bad magic)");
  char v[4];
  if (!read_exact(v, sizeof(v))) return fail(LoadStatus::kTruncated, "preamble cut");
  const auto version = static_cast<std::uint32_t>(load_le(v, 4));
  if (version != kStateFormatVersion) {
    return fail(LoadStatus::kWrongVersion, "format version " + std::to_string(version) +
                                               ", this build reads " +
                                               std::to_string(kStateFormatVersion));
  }
  // The header record must come first.
  std::string body;
  return next_chunk(&body);  // false with the status set: cut, trailer or error
}

bool StateFileReader::next_chunk(std::string* body) {
  if (ended_) return false;
  char head[5];
  if (!read_exact(head, 1)) return fail(LoadStatus::kTruncated, "no trailer (file cut short)");
  const auto kind = static_cast<std::uint8_t>(head[0]);
  if (kind == kTrailer) {
    char sum[8];
    const std::uint64_t got = XXH3_64bits_digest(static_cast<XXH3_state_t*>(hash_state_));
    if (!read_exact(sum, sizeof(sum), false))
      return fail(LoadStatus::kTruncated, "no trailer (file cut short)");
    if (load_le(sum, 8) != got) return fail(LoadStatus::kCorrupt, "checksum mismatch");
    if (!have_header_) return fail(LoadStatus::kCorrupt, "no header record");
    if (!at_eof()) return fail(LoadStatus::kCorrupt, "bytes after the trailer");
    ended_ = true;
    return false;
  }
  if (!read_exact(head + 1, 4)) return fail(LoadStatus::kTruncated, "record header cut");
  const std::uint64_t len = load_le(head + 1, 4);
  const bool is_header = !have_header_;
  if (kind != (is_header ? kHeaderRecord : kChunkRecord))
    return fail(LoadStatus::kCorrupt, "unexpected record kind " + std::to_string(kind));
  if (len > kMaxRecordBytes)
    return fail(LoadStatus::kCorrupt, "record of " + std::to_string(len) + " bytes, over " +
                                          std::to_string(kMaxRecordBytes));
  body->resize(len);
  if (!read_exact(body->data(), len)) return fail(LoadStatus::kTruncated, "record cut");
  if (is_header) {
    if (!header_.ParseFromString(*body)) return fail(LoadStatus::kCorrupt, "unparsable header");
    have_header_ = true;
  }
  return true;
}

bool StateFileReader::rewind() {
  if (status_ != LoadStatus::kOk || !have_header_) return false;
  ended_ = false;
  have_header_ = false;
  buffer_pos_ = buffer_len_ = 0;
  if (fd_ < 0) {
    memory_pos_ = 0;
  } else if (::lseek(fd_, 0, SEEK_SET) != 0) {
    return fail(LoadStatus::kUnreadable, std::string("seek: ") + std::strerror(errno));
  }
  return read_preamble();
}

StateFileContents read_state_file(const std::string& path, std::uint64_t max_file_bytes) {
  auto reader = StateFileReader::open(path, max_file_bytes);
  return collect(*reader);
}

StateFileContents parse_state_bytes(std::string_view bytes) {
  auto reader = StateFileReader::over(bytes);
  return collect(*reader);
}

std::string temp_prefix(const std::string& path) { return path + kTempInfix; }

std::string kept_aside_path(const std::string& path, std::int64_t unix_seconds) {
  return path + ".corrupt-" + std::to_string(unix_seconds);
}

std::string keep_aside(const std::string& path, std::int64_t unix_seconds) {
  const std::string to = kept_aside_path(path, unix_seconds);
  if (::rename(path.c_str(), to.c_str()) != 0)
    return "rename " + path + " to " + to + ": " + std::strerror(errno);
  return {};
}

StateFileWriter::StateFileWriter(std::string path, std::string tmp_path, std::FILE* file)
    : path_(std::move(path)),
      tmp_path_(std::move(tmp_path)),
      file_(file),
      hash_state_(XXH3_createState()) {
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(hash_state_));
}

StateFileWriter::~StateFileWriter() {
  if (file_ != nullptr) std::fclose(file_);
  if (!committed_) ::unlink(tmp_path_.c_str());
  XXH3_freeState(static_cast<XXH3_state_t*>(hash_state_));
}

std::unique_ptr<StateFileWriter> StateFileWriter::create(const std::string& path,
                                                         const state_pb::StateHeader& header,
                                                         std::string* error) {
  std::string tmp = path + kTempInfix + "XXXXXX";
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) {
    *error = "create " + path + kTempInfix + "XXXXXX: " + std::strerror(errno);
    return nullptr;
  }
  std::FILE* f = ::fdopen(fd, "wb");
  if (f == nullptr) {
    *error = "open " + tmp + ": " + std::strerror(errno);
    ::close(fd);
    ::unlink(tmp.c_str());
    return nullptr;
  }
  std::unique_ptr<StateFileWriter> w(new StateFileWriter(path, std::move(tmp), f));
  char version[4];
  store_le(version, kStateFormatVersion, 4);
  if (!w->put(kMagic, sizeof(kMagic)) || !w->put(version, sizeof(version)) ||
      !w->put_record(kHeaderRecord, header.SerializeAsString())) {
    *error = w->error_;
    return nullptr;
  }
  return w;
}

bool StateFileWriter::put(const void* data, std::size_t n) {
  if (failed_) return false;
  if (std::fwrite(data, 1, n, file_) != n) {
    failed_ = true;
    error_ = "write " + tmp_path_ + ": " + std::strerror(errno);
    return false;
  }
  XXH3_64bits_update(static_cast<XXH3_state_t*>(hash_state_), data, n);
  written_ += n;
  return true;
}

bool StateFileWriter::put_record(std::uint8_t kind, std::string_view bytes) {
  char head[5];
  head[0] = static_cast<char>(kind);
  store_le(head + 1, bytes.size(), 4);
  return put(head, sizeof(head)) && put(bytes.data(), bytes.size());
}

bool StateFileWriter::append_chunk(std::string_view serialized_chunk) {
  return put_record(kChunkRecord, serialized_chunk);
}

std::string StateFileWriter::commit() {
  const char end = static_cast<char>(kTrailer);
  if (!put(&end, 1)) return error_;
  char sum[8];
  store_le(sum, XXH3_64bits_digest(static_cast<XXH3_state_t*>(hash_state_)), 8);
  if (std::fwrite(sum, 1, sizeof(sum), file_) != sizeof(sum) || std::fflush(file_) != 0 ||
      ::fsync(::fileno(file_)) != 0) {
    return "write " + tmp_path_ + ": " + std::strerror(errno);
  }
  written_ += sizeof(sum);
  std::fclose(file_);
  file_ = nullptr;
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0)
    return "rename " + tmp_path_ + ": " + std::strerror(errno);
  committed_ = true;
  // The rename is durable once the directory entry is.
  const std::size_t slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path_.substr(0, slash + 1);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

}  // namespace ic::persist
