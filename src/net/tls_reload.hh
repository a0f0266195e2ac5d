#pragma once
// The certificate and key of a TLS listener, re-read without a restart:
// on demand (SIGHUP) and when either file changes (cert-manager and mounted
// Kubernetes Secrets replace them in place). A reload builds a whole new
// TlsContext; only when it loads cleanly does it become current(), so a
// half-written or mismatched pair keeps the last good certificate serving.
// New handshakes take current(); live connections keep the context they
// started with (tls_session_factory holds it per connection).
//
// Thread-safety: reload()/poll() from one thread (the server's signal
// thread, never a reactor: they read files); current() from any thread.

#include <atomic>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "net/tls.hh"

namespace ic::net {

class TlsCertificateStore {
 public:
  enum class Outcome { kUnchanged, kReloaded, kFailed };

  TlsCertificateStore(std::string cert_file, std::string key_file, std::vector<std::string> alpn);

  // First load; false with `*error` (one line) when unusable.
  bool load(std::string* error);
  // Re-reads both files now. kFailed keeps the last good context.
  Outcome reload(std::string* error);
  // reload() when either file's mtime, size or inode moved since the last
  // attempt (good or bad) and has stayed put since the previous poll (a file
  // still being written is not read half-way); else kUnchanged. One stat()
  // per file. Call it periodically (the server: once a second).
  Outcome poll(std::string* error);

  // The context new connections should use; never null after load() passed.
  std::shared_ptr<TlsContext> current() const { return current_.load(); }
  const std::string& cert_file() const { return cert_file_; }
  const std::string& key_file() const { return key_file_; }

 private:
  struct FileId {
    std::timespec mtime{};
    std::int64_t size = -1;
    std::uint64_t inode = 0;
    bool operator==(const FileId& o) const {
      return mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec && size == o.size &&
             inode == o.inode;
    }
  };
  static FileId identify(const std::string& path);

  std::string cert_file_;
  std::string key_file_;
  std::vector<std::string> alpn_;
  FileId cert_id_;  // identities at the last reload attempt
  FileId key_id_;
  FileId cert_seen_;  // identities at the previous poll
  FileId key_seen_;
  std::atomic<std::shared_ptr<TlsContext>> current_;
};

}  // namespace ic::net
