#include "replication/bootstrap.hh"

#include <nats/nats.h>

#include "replication/state_store.hh"

namespace ic::replication {

Bootstrap fetch_bootstrap(const std::string& url, const NatsTls& tls, const std::string& creds_file,
                          const std::string& stream, bool want_snapshot,
                          std::chrono::milliseconds timeout) {
  Bootstrap out;
  natsOptions* options = nullptr;
  natsConnection* conn = nullptr;
  jsCtx* js = nullptr;
  natsOptions_Create(&options);
  natsOptions_SetURL(options, url.c_str());
  natsOptions_SetName(options, "inferencecache-server bootstrap");
  natsOptions_SetTimeout(options, static_cast<int64_t>(timeout.count()));
  natsOptions_SetAllowReconnect(options, false);
  std::string options_error = apply_tls(options, tls);
  if (options_error.empty() && !creds_file.empty())
    options_error = apply_creds(options, creds_file);
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = static_cast<int64_t>(timeout.count());
  natsStatus s = options_error.empty() ? natsConnection_Connect(&conn, options) : NATS_ERR;
  if (s == NATS_OK) s = natsConnection_JetStream(&js, conn, &jo);
  if (!options_error.empty()) {
    out.error = options_error;
  } else if (s != NATS_OK) {
    out.error = std::string("NATS not reached: ") + natsStatus_GetText(s);
  } else {
    StateStore store(js, stream);
    std::string error;
    out.policy = store.kept(KeptDocument::kPolicy, &error);
    if (error.empty()) out.templates = store.kept(KeptDocument::kTemplates, &error);
    out.reached = error.empty();
    if (want_snapshot && out.reached) {
      state_pb::SnapshotManifest manifest;
      if (store.fetch_snapshot(&manifest, &out.state_file, &error)) {
        out.manifest = std::move(manifest);
      }
    }
    out.error = error;
  }
  jsCtx_Destroy(js);
  natsConnection_Destroy(conn);
  natsOptions_Destroy(options);
  return out;
}

}  // namespace ic::replication
