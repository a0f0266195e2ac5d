// State file container: framing, checksum and the atomic replace
// (docs/persistence.md "File format").

#include "persist/state_file.hh"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace ic::persist {

namespace {

constexpr char kMagic[8] = {'I', 'C', 'S', 'T', 'A', 'T', 'E', '\0'};
constexpr std::uint8_t kHeaderRecord = 1;
constexpr std::uint8_t kChunkRecord = 2;
constexpr std::uint8_t kTrailer = 0xFF;
constexpr std::size_t kPreamble = sizeof(kMagic) + 4;
constexpr std::size_t kTrailerSize = 1 + 8;

std::uint64_t load_le(const char* p, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

void store_le(char* p, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

StateFileContents fail(StateFileContents c, LoadStatus status, std::string error) {
  c.status = status;
  c.error = std::move(error);
  c.chunks.clear();
  c.bytes.clear();
  return c;
}

// Splits the records between the preamble and the trailer; the checksum was
// already verified, so framing errors mean a writer bug or a forged file.
StateFileContents parse_records(StateFileContents c, std::size_t end) {
  std::size_t pos = kPreamble;
  bool have_header = false;
  while (pos < end) {
    if (end - pos < 5) return fail(std::move(c), LoadStatus::kTruncated, "record header cut");
    const auto kind = static_cast<std::uint8_t>(c.bytes[pos]);
    const std::uint64_t len = load_le(c.bytes.data() + pos + 1, 4);
    pos += 5;
    if (len > end - pos) return fail(std::move(c), LoadStatus::kTruncated, "record cut");
    const std::string_view body(c.bytes.data() + pos, len);
    pos += len;
    if (kind == kHeaderRecord && !have_header) {
      if (!c.header.ParseFromArray(body.data(), static_cast<int>(body.size())))
        return fail(std::move(c), LoadStatus::kCorrupt, "unparsable header");
      have_header = true;
    } else if (kind == kChunkRecord && have_header) {
      c.chunks.push_back(body);
    } else {
      return fail(std::move(c), LoadStatus::kCorrupt,
                  "unexpected record kind " + std::to_string(kind));
    }
  }
  if (!have_header) return fail(std::move(c), LoadStatus::kCorrupt, "no header record");
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

StateFileContents read_state_file(const std::string& path) {
  StateFileContents c;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return fail(std::move(c), err == ENOENT ? LoadStatus::kMissing : LoadStatus::kUnreadable,
                path + ": " + std::strerror(err));
  }
  std::string bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
  if (in.bad()) return fail(std::move(c), LoadStatus::kUnreadable, path + ": read error");
  return parse_state_bytes(std::move(bytes));
}

StateFileContents parse_state_bytes(std::string bytes) {
  StateFileContents c;
  c.bytes = std::move(bytes);
  const std::string& b = c.bytes;
  if (b.size() < sizeof(kMagic) || std::memcmp(b.data(), kMagic, sizeof(kMagic)) != 0)
    return fail(std::move(c),
                b.size() < sizeof(kMagic) ? LoadStatus::kTruncated : LoadStatus::kCorrupt,
                "not a state file (bad magic)");
  if (b.size() < kPreamble) return fail(std::move(c), LoadStatus::kTruncated, "preamble cut");
  const auto version = static_cast<std::uint32_t>(load_le(b.data() + sizeof(kMagic), 4));
  if (version != kStateFormatVersion) {
    return fail(std::move(c), LoadStatus::kWrongVersion,
                "format version " + std::to_string(version) + ", this build reads " +
                    std::to_string(kStateFormatVersion));
  }
  if (b.size() < kPreamble + kTrailerSize ||
      static_cast<std::uint8_t>(b[b.size() - kTrailerSize]) != kTrailer)
    return fail(std::move(c), LoadStatus::kTruncated, "no trailer (file cut short)");
  const std::size_t end = b.size() - kTrailerSize;
  const std::uint64_t want = load_le(b.data() + end + 1, 8);
  if (XXH3_64bits(b.data(), end + 1) != want)
    return fail(std::move(c), LoadStatus::kCorrupt, "checksum mismatch");
  return parse_records(std::move(c), end);
}

StateFileWriter::StateFileWriter(std::string path, std::FILE* file)
    : path_(std::move(path)),
      tmp_path_(path_ + ".tmp"),
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
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    *error = "open " + tmp + ": " + std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<StateFileWriter> w(new StateFileWriter(path, f));
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
