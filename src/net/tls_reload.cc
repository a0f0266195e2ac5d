#include "net/tls_reload.hh"

#include <sys/stat.h>

namespace ic::net {

TlsCertificateStore::TlsCertificateStore(std::string cert_file, std::string key_file,
                                         std::vector<std::string> alpn)
    : cert_file_(std::move(cert_file)), key_file_(std::move(key_file)), alpn_(std::move(alpn)) {}

TlsCertificateStore::FileId TlsCertificateStore::identify(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return FileId{};
  return FileId{st.st_mtim, st.st_size, st.st_ino};
}

bool TlsCertificateStore::load(std::string* error) { return reload(error) == Outcome::kReloaded; }

TlsCertificateStore::Outcome TlsCertificateStore::reload(std::string* error) {
  // Identify before reading: a write racing the read shows up as a change at
  // the next poll and is read again.
  cert_id_ = cert_seen_ = identify(cert_file_);
  key_id_ = key_seen_ = identify(key_file_);
  std::shared_ptr<TlsContext> ctx = TlsContext::load(cert_file_, key_file_, alpn_, error);
  if (!ctx) return Outcome::kFailed;
  current_.store(std::move(ctx));
  return Outcome::kReloaded;
}

TlsCertificateStore::Outcome TlsCertificateStore::poll(std::string* error) {
  const FileId cert = identify(cert_file_);
  const FileId key = identify(key_file_);
  const bool settled = cert == cert_seen_ && key == key_seen_;
  cert_seen_ = cert;
  key_seen_ = key;
  if ((cert == cert_id_ && key == key_id_) || !settled) return Outcome::kUnchanged;
  return reload(error);
}

}  // namespace ic::net
