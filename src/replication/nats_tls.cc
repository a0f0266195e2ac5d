// TLS options of the NATS connections (replication/nats_tls.hh).

#include "replication/nats_tls.hh"

namespace ic::replication {

namespace {

std::string failed(const char* flag, natsStatus s) {
  std::string text = std::string(flag) + ": " + natsStatus_GetText(s);
  if (const char* last = nats_GetLastError(nullptr); last != nullptr && *last != '\0') {
    text += ": ";
    text += last;
  }
  return text;
}

}  // namespace

std::string apply_tls(natsOptions* options, const NatsTls& tls) {
  if (!tls.enabled()) return {};
  if (natsStatus s = natsOptions_SetSecure(options, true); s != NATS_OK)
    return failed("--nats-tls", s);
  if (!tls.ca_file.empty()) {
    if (natsStatus s = natsOptions_LoadCATrustedCertificates(options, tls.ca_file.c_str());
        s != NATS_OK)
      return failed("--nats-tls-ca-file", s);
  }
  if (!tls.cert_file.empty()) {
    if (natsStatus s =
            natsOptions_LoadCertificatesChain(options, tls.cert_file.c_str(), tls.key_file.c_str());
        s != NATS_OK)
      return failed("--nats-tls-cert-file", s);
  }
  return {};
}

}  // namespace ic::replication
