#pragma once
// NATS credentials (docs/replication.md "Who may publish"): --nats-creds-file,
// a `.creds` file (a user JWT and its NKey seed, as `nsc` writes them) handed
// to the NATS C client for the replication connection and the start-up
// bootstrap alike (natsOptions_SetUserCredentialsFromFiles).

#include <nats/nats.h>

#include <string>

namespace ic::replication {

// Largest credentials file read, bytes (nsc writes about 1 KiB).
inline constexpr std::size_t kMaxCredsFileBytes = 64 * 1024;

// Checks that `path` is a readable regular file of at most
// kMaxCredsFileBytes holding a user JWT (a line starting "eyJ", base64url of
// '{"') and a user NKey seed (a line starting "SU"). The NATS client reads the
// file only when it connects, so a bad file would otherwise be a connection
// failure retried forever. "" or why not ("--nats-creds-file: ...").
std::string check_creds_file(const std::string& path);

// Sets `path` (non-empty) as the credentials of `options`. "" or why not.
std::string apply_creds(natsOptions* options, const std::string& path);

}  // namespace ic::replication
