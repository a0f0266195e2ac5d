#pragma once
// TLS to NATS (docs/replication.md "Who may publish"): --nats-tls-ca-file,
// --nats-tls-cert-file, --nats-tls-key-file, handed to the NATS C client for
// the replication connection and the start-up bootstrap alike.

#include <nats/nats.h>

#include <string>

namespace ic::replication {

struct NatsTls {
  std::string ca_file;    // PEM CA bundle the NATS server's certificate must chain to
  std::string cert_file;  // PEM client certificate (with key_file), for servers that verify clients
  std::string key_file;
  // TLS is used when any of them is given.
  bool enabled() const { return !ca_file.empty() || !cert_file.empty() || !key_file.empty(); }
};

// Requires TLS on `options` and loads the CA and the client certificate
// chain. "" or why not ("--nats-tls-ca-file: <NATS error>").
std::string apply_tls(natsOptions* options, const NatsTls& tls);

}  // namespace ic::replication
