#include "net/tls.hh"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cstring>

#include "base/log.hh"

namespace ic::net {

namespace {

constexpr std::size_t kPlainChunk = 16 * 1024;  // one TLS record of plaintext
// A scanner or a client with the wrong CA fails every handshake: one line
// per 10 s across all cores, with the count of the ones not logged.
base::LogRateLimit g_handshake_log_limit(10'000'000);

std::string openssl_error() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof buf);
  return buf;
}

// ALPN: the first of our protocols that the client offered.
int select_alpn(SSL* /*ssl*/, const unsigned char** out, unsigned char* outlen,
                const unsigned char* in, unsigned int inlen, void* arg) {
  const auto* ours = static_cast<const std::vector<std::string>*>(arg);
  for (const std::string& proto : *ours) {
    for (unsigned int i = 0; i < inlen;) {
      const unsigned int len = in[i];
      if (i + 1 + len > inlen) break;
      if (len == proto.size() && std::memcmp(in + i + 1, proto.data(), len) == 0) {
        *out = in + i + 1;
        *outlen = static_cast<unsigned char>(len);
        return SSL_TLSEXT_ERR_OK;
      }
      i += 1 + len;
    }
  }
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

// The TLS layer of one connection: a Session towards the TcpConnection
// (ciphertext) and a Connection towards the protocol's Session (plaintext).
class TlsSession final : public Session, public Connection {
 public:
  TlsSession(Connection& outer, const std::shared_ptr<TlsContext>& ctx)
      : outer_(outer), ctx_(ctx), ssl_(SSL_new(ctx->native())) {
    BIO* rbio = BIO_new(BIO_s_mem());
    BIO* wbio = BIO_new(BIO_s_mem());
    BIO_set_mem_eof_return(rbio, -1);  // empty = "want more", not EOF
    SSL_set_bio(ssl_, rbio, wbio);     // ssl_ owns both
    SSL_set_accept_state(ssl_);
    rbio_ = rbio;
    wbio_ = wbio;
  }
  ~TlsSession() override { SSL_free(ssl_); }

  void set_inner(std::unique_ptr<Session> inner) { inner_ = std::move(inner); }
  bool has_inner() const { return inner_ != nullptr; }

  // ---- Session (ciphertext side) ----
  bool on_data(std::span<const std::byte> data) override {
    if (failed_) return false;
    BIO_write(rbio_, data.data(), static_cast<int>(data.size()));
    if (!handshake_done_ && !advance_handshake()) return false;
    if (!handshake_done_) return true;
    return read_plaintext();
  }
  void flush() override {
    // Records decrypted while the inner Session had reading paused.
    if (redeliver_ && !inner_paused_) {
      redeliver_ = false;
      if (!read_plaintext()) outer_.close(false);
    }
    if (handshake_done_ && inner_) inner_->flush();
    drain_ciphertext();
  }
  void on_shutdown() override {
    if (inner_) inner_->on_shutdown();
  }
  void on_max_age() override {
    if (inner_) inner_->on_max_age();
  }
  bool idle() const override { return !inner_ || inner_->idle(); }
  void on_close() override {
    if (inner_) inner_->on_close();
    inner_.reset();
  }

  // ---- Connection (plaintext side, for the inner Session) ----
  void send(std::span<const std::byte> bytes) override {
    if (failed_ || bytes.empty()) return;
    if (!handshake_done_) {
      held_.insert(held_.end(), bytes.begin(), bytes.end());
      return;
    }
    encrypt(bytes);
  }
  std::size_t queued_bytes() const override { return outer_.queued_bytes() + held_.size(); }
  void pause_reading() override {
    inner_paused_ = true;
    outer_.pause_reading();
  }
  void resume_reading() override {
    inner_paused_ = false;
    outer_.resume_reading();
    redeliver_ = true;
    outer_.request_flush();
  }
  void request_flush() override { outer_.request_flush(); }
  void close(bool abort) override {
    if (!abort && handshake_done_ && !failed_) {
      SSL_shutdown(ssl_);  // close_notify
      drain_ciphertext();
    }
    outer_.close(abort);
  }
  unsigned core() const override { return outer_.core(); }
  std::string_view peer() const override { return outer_.peer(); }

 private:
  bool advance_handshake() {
    const int rc = SSL_do_handshake(ssl_);
    drain_ciphertext();
    if (rc == 1) {
      handshake_done_ = true;
      std::vector<std::byte> held = std::move(held_);
      held_.clear();
      if (!held.empty()) encrypt(held);
      return true;
    }
    const int err = SSL_get_error(ssl_, rc);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return true;
    log_handshake_failure(err == SSL_ERROR_SSL ? openssl_error() : "connection ended");
    ERR_clear_error();
    failed_ = true;  // the alert (if any) is queued; close after it is written
    return false;
  }

  void log_handshake_failure(const std::string& why) {
    std::uint64_t suppressed = 0;
    if (!g_handshake_log_limit.allow(base::log_clock_us(), &suppressed)) return;
    base::log(base::LogLevel::warn, "TLS handshake failed",
              {{"peer", outer_.peer()}, {"error", why}, {"suppressed", suppressed}});
  }

  bool read_plaintext() {
    std::byte buf[kPlainChunk];
    while (!inner_paused_) {
      const int n = SSL_read(ssl_, buf, sizeof buf);
      if (n > 0) {
        if (inner_ &&
            !inner_->on_data(std::span<const std::byte>(buf, static_cast<std::size_t>(n)))) {
          drain_ciphertext();
          return false;
        }
        continue;
      }
      const int err = SSL_get_error(ssl_, n);
      drain_ciphertext();  // key updates, session tickets
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return true;
      ERR_clear_error();
      // close_notify from the peer, or a bad record: either way we are done.
      failed_ = err != SSL_ERROR_ZERO_RETURN;
      return false;
    }
    return true;  // the rest waits in OpenSSL until resume_reading()
  }

  void encrypt(std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
      const int n = SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size()));
      if (n <= 0) {
        ERR_clear_error();
        failed_ = true;
        outer_.close(true);
        return;
      }
      bytes = bytes.subspan(static_cast<std::size_t>(n));
    }
    drain_ciphertext();
  }

  void drain_ciphertext() {
    char* data = nullptr;
    const long pending = BIO_get_mem_data(wbio_, &data);
    if (pending <= 0) return;
    outer_.send(std::span<const std::byte>(reinterpret_cast<const std::byte*>(data),
                                           static_cast<std::size_t>(pending)));
    (void)BIO_reset(wbio_);
  }

  Connection& outer_;
  std::shared_ptr<TlsContext> ctx_;  // keeps the SSL_CTX alive
  SSL* ssl_;
  BIO* rbio_ = nullptr;
  BIO* wbio_ = nullptr;
  std::unique_ptr<Session> inner_;
  std::vector<std::byte> held_;  // plaintext sent before the handshake finished
  bool handshake_done_ = false;
  bool failed_ = false;
  bool inner_paused_ = false;  // the inner Session asked for no on_data
  bool redeliver_ = false;     // resumed: pass on what OpenSSL still holds
};

}  // namespace

TlsContext::TlsContext(SSL_CTX* ctx, std::vector<std::string> alpn)
    : ctx_(ctx), alpn_(std::move(alpn)) {}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

std::string TlsContext::subject() const {
  X509* cert = SSL_CTX_get0_certificate(ctx_);
  if (cert == nullptr) return {};
  BIO* out = BIO_new(BIO_s_mem());
  X509_NAME_print_ex(out, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  const long n = BIO_get_mem_data(out, &data);
  std::string text(data, static_cast<std::size_t>(n > 0 ? n : 0));
  BIO_free(out);
  return text;
}

std::string TlsContext::not_after() const {
  X509* cert = SSL_CTX_get0_certificate(ctx_);
  if (cert == nullptr) return {};
  BIO* out = BIO_new(BIO_s_mem());
  ASN1_TIME_print(out, X509_get0_notAfter(cert));
  char* data = nullptr;
  const long n = BIO_get_mem_data(out, &data);
  std::string text(data, static_cast<std::size_t>(n > 0 ? n : 0));
  BIO_free(out);
  return text;
}

std::shared_ptr<TlsContext> TlsContext::load(const std::string& cert_file,
                                             const std::string& key_file,
                                             std::vector<std::string> alpn, std::string* error) {
  const auto fail = [&](std::string why) -> std::shared_ptr<TlsContext> {
    if (error != nullptr) *error = std::move(why);
    return nullptr;
  };
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return fail("TLS: " + openssl_error());
  std::shared_ptr<TlsContext> result(new TlsContext(ctx, std::move(alpn)));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_file.c_str()) != 1) {
    return fail("--tls-cert-file: " + openssl_error());
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
      ERR_clear_error();
      return fail("--tls-key-file: key does not match the certificate");
    }
    return fail("--tls-key-file: " + openssl_error());
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    return fail("--tls-key-file: key does not match the certificate");
  }
  SSL_CTX_set_alpn_select_cb(ctx, select_alpn, &result->alpn_);
  return result;
}

SessionFactory tls_session_factory(std::shared_ptr<TlsContext> ctx, SessionFactory inner) {
  return tls_session_factory([ctx = std::move(ctx)] { return ctx; }, std::move(inner));
}

SessionFactory tls_session_factory(std::function<std::shared_ptr<TlsContext>()> current,
                                   SessionFactory inner) {
  return [current = std::move(current),
          inner = std::move(inner)](Connection& outer) -> std::unique_ptr<Session> {
    auto tls = std::make_unique<TlsSession>(outer, current());
    tls->set_inner(inner(*tls));
    if (!tls->has_inner()) return nullptr;
    return tls;
  };
}

}  // namespace ic::net
