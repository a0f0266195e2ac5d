// TLS through a real listener: OpenSSL client ↔ TlsSession ↔ echo Session.

#include "net/tls.hh"

#include <doctest/doctest.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cstdio>
#include <memory>
#include <string>

#include "loopback.hh"
#include "support/echo_session.hh"

namespace {

// A self-signed P-256 certificate and its key, written to temp files.
struct TempCert {
  std::string cert_path;
  std::string key_path;
  explicit TempCert(const char* tag) {
    const std::string base = "/tmp/ic-tls-test-" + std::to_string(::getpid()) + "-" + tag;
    cert_path = base + "-cert.pem";
    key_path = base + "-key.pem";
    EVP_PKEY* key = EVP_EC_gen("P-256");
    X509* x = X509_new();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), 0);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, key);
    X509_NAME* name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
    X509_set_issuer_name(x, name);
    X509_sign(x, key, EVP_sha256());
    FILE* f = std::fopen(cert_path.c_str(), "w");
    PEM_write_X509(f, x);
    std::fclose(f);
    f = std::fopen(key_path.c_str(), "w");
    PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(f);
    X509_free(x);
    EVP_PKEY_free(key);
  }
  ~TempCert() {
    std::remove(cert_path.c_str());
    std::remove(key_path.c_str());
  }
};

// Output before the handshake finished must be held, then encrypted: the
// echo greets with "hi:" from its constructor.
std::unique_ptr<ic::net::Session> make_echo(ic::net::Connection& c) {
  return std::make_unique<ic::test::EchoSession>(c, "hi:");
}

// A listener that speaks TLS with `cert` (ALPN h2) to the echo session.
ic::net::ListenerOptions tls_echo_listener(const TempCert& cert, std::string* error = nullptr) {
  auto ctx = ic::net::TlsContext::load(cert.cert_path, cert.key_path, {"h2"}, error);
  REQUIRE(ctx != nullptr);
  ic::net::ListenerOptions opts;
  opts.factory = ic::net::tls_session_factory(ctx, make_echo);
  return opts;
}

// A blocking TLS client on a loopback socket.
struct Client {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = nullptr;
  int fd = -1;
  Client(std::uint16_t port, const unsigned char* alpn, unsigned alpn_len) {
    SSL_CTX_set_alpn_protos(ctx, alpn, alpn_len);
    fd = test::connect_to(port);
    ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
  }
  ~Client() {
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    if (fd >= 0) ::close(fd);
  }
  bool handshake() { return SSL_connect(ssl) == 1; }
  std::string alpn() const {
    const unsigned char* p = nullptr;
    unsigned len = 0;
    SSL_get0_alpn_selected(ssl, &p, &len);
    return std::string(reinterpret_cast<const char*>(p), len);
  }
  std::string read(std::size_t n) {
    std::string out(n, '\0');
    std::size_t got = 0;
    while (got < n) {
      const int r = SSL_read(ssl, out.data() + got, static_cast<int>(n - got));
      if (r <= 0) break;
      got += static_cast<std::size_t>(r);
    }
    out.resize(got);
    return out;
  }
};

const unsigned char kH2[] = {2, 'h', '2'};
const unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

}  // namespace

TEST_SUITE("net") {
  TEST_CASE("TLS: handshake with ALPN h2, then plaintext both ways") {
    TempCert cert("ok");
    std::string error;
    test::Loopback lb(2, tls_echo_listener(cert, &error));
    CHECK(error.empty());
    Client client(lb.port(), kH2, sizeof kH2);
    REQUIRE(client.handshake());
    CHECK(client.alpn() == "h2");
    CHECK(client.read(3) == "hi:");
    const std::string big = test::pattern(1u << 20);
    std::thread writer([&] { SSL_write(client.ssl, big.data(), static_cast<int>(big.size())); });
    const std::string got = client.read(big.size());
    writer.join();
    CHECK(got.size() == big.size());
    CHECK(got == big);
  }

  TEST_CASE("TLS: a client whose ALPN lacks h2 fails the handshake") {
    TempCert cert("alpn");
    test::Loopback lb(1, tls_echo_listener(cert));
    Client client(lb.port(), kHttp11, sizeof kHttp11);
    CHECK_FALSE(client.handshake());
  }

  TEST_CASE("TLS: plaintext bytes on a TLS port close the connection") {
    TempCert cert("plain");
    test::Loopback lb(1, tls_echo_listener(cert));
    const int fd = test::connect_to(lb.port());
    REQUIRE(test::write_all(fd, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
    const auto [bytes, eof] = test::read_to_eof(fd);
    CHECK(eof);
    CHECK(bytes.find("hi:") == std::string::npos);  // nothing leaks unencrypted
    ::close(fd);
  }

  TEST_CASE("TLS: unusable certificate or key is a one-line error") {
    TempCert a("a");
    TempCert b("b");
    std::string error;
    CHECK(ic::net::TlsContext::load(a.cert_path, b.key_path, {"h2"}, &error) == nullptr);
    CHECK(error == "--tls-key-file: key does not match the certificate");
    CHECK(ic::net::TlsContext::load("/nonexistent.pem", a.key_path, {"h2"}, &error) == nullptr);
    CHECK(error.rfind("--tls-cert-file: ", 0) == 0);
    CHECK(ic::net::TlsContext::load(a.cert_path, a.cert_path, {"h2"}, &error) == nullptr);
    CHECK(error.rfind("--tls-key-file: ", 0) == 0);
  }
}
