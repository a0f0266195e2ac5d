#pragma once
// TLS for a listener (docs/contract.md "Transport rules": TLS is opt-in with a
// certificate and key). OpenSSL runs over memory BIOs as a Session/Connection
// sandwich: the TcpConnection carries ciphertext, the protocol's Session sees
// plaintext and never knows. ALPN selects "h2" for gRPC (RFC 7301; gRPC over
// TLS requires it).

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/session.hh"

typedef struct ssl_ctx_st SSL_CTX;

namespace ic::net {

// A server SSL_CTX: certificate chain + private key, TLS ≥ 1.2, ALPN.
class TlsContext {
 public:
  // Loads PEM `cert_file` (leaf first, then chain) and PEM `key_file`;
  // `alpn` lists the protocols we accept in preference order (e.g. {"h2"}).
  // A client that offers ALPN without any of them fails the handshake; one
  // that offers none is accepted. Returns nullptr and sets `*error` (one
  // line, e.g. "--tls-key-file: key does not match the certificate").
  static std::shared_ptr<TlsContext> load(const std::string& cert_file, const std::string& key_file,
                                          std::vector<std::string> alpn, std::string* error);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* native() const { return ctx_; }
  // The leaf certificate's subject (RFC 2253) and notAfter ("Jan  2 03:04:05
  // 2027 GMT"), for logs.
  std::string subject() const;
  std::string not_after() const;
  // ALPN protocols in preference order.
  const std::vector<std::string>& alpn() const { return alpn_; }

 private:
  TlsContext(SSL_CTX* ctx, std::vector<std::string> alpn);
  SSL_CTX* ctx_;
  std::vector<std::string> alpn_;
};

// Wraps `inner` so every connection of the listener speaks TLS with `ctx`;
// each inner Session is built at accept time and sees plaintext only. Output
// it sends before the handshake finished is held (bounded by the listener's
// output cap through queued_bytes()) and encrypted once it has.
SessionFactory tls_session_factory(std::shared_ptr<TlsContext> ctx, SessionFactory inner);

// Same, with the context looked up per accepted connection: after a
// certificate reload new handshakes use the new context while live
// connections keep the one they started with. `current` runs on the accepting
// core and must be thread-safe.
SessionFactory tls_session_factory(std::function<std::shared_ptr<TlsContext>()> current,
                                   SessionFactory inner);

}  // namespace ic::net
