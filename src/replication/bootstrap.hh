#pragma once
// What a starting server fetches from JetStream before its reactors start
// (docs/replication.md "Restart"): the kept policy and template document and,
// when it has no usable state file, the latest snapshot another server
// published. One short-lived NATS connection on the calling thread (the main thread at startup),
// bounded by a timeout; NATS away means nothing fetched, never a failure.

#include <chrono>
#include <optional>
#include <string>

#include "inferencecache/state/v1/state.pb.h"
#include "replication/nats_creds.hh"
#include "replication/nats_tls.hh"

namespace ic::replication {

namespace state_pb = ::inferencecache::state::v1;

struct Bootstrap {
  bool reached = false;  // JetStream answered
  std::string error;     // why not, or why the snapshot could not be read ("" = none published)
  std::optional<state_pb::DurableDocument> policy;     // <stream>.state.policy
  std::optional<state_pb::DurableDocument> templates;  // <stream>.state.templates
  std::optional<state_pb::SnapshotManifest> manifest;  // set with state_file
  std::string state_file;                              // the snapshot, verified
};

// Connects to `url` (--nats-url, with `tls` when enabled and the credentials
// file `creds_file` when not empty) within `timeout` and reads the kept policy
// and template document and, when `want_snapshot`, the latest snapshot of
// stream `stream`.
Bootstrap fetch_bootstrap(const std::string& url, const NatsTls& tls, const std::string& creds_file,
                          const std::string& stream, bool want_snapshot,
                          std::chrono::milliseconds timeout);

}  // namespace ic::replication
