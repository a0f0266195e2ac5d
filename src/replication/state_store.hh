#pragma once
// What a replicated group keeps beyond the changes stream's age window
// (docs/replication.md "Policy and templates", "Snapshots"): the stream "<stream>_STATE"
// with subjects "<stream>.state.>", no MaxAge and one message per subject
// (MaxMsgsPerSubject = 1), so JetStream itself keeps only the latest policy,
// the latest template document and the latest snapshot:
//
//   <stream>.state.policy               DurableDocument (a CachePolicy document)
//   <stream>.state.templates            DurableDocument (a prompt-template document)
//   <stream>.state.snapshot.manifest    SnapshotManifest
//   <stream>.state.snapshot.chunk.<i>   SnapshotChunk i of the manifest's
//
// Blocking JetStream requests: called from the replication thread, the
// state saver's thread or the main thread before the reactors start, never
// from a reactor.

#include <nats/nats.h>

#include <cstdint>
#include <optional>
#include <string>

#include "inferencecache/state/v1/state.pb.h"
#include "replication/snapshot.hh"

namespace ic::replication {

// The documents kept one each on their own subject "<stream>.state.<name>";
// each is a changes-stream record kind (ReplicationRecord's policy_json,
// templates_json) that must outlive the stream's MaxAge.
enum class KeptDocument { kPolicy, kTemplates };

// "policy", "templates": the subject's last token and the name in log lines.
const char* kept_document_name(KeptDocument kind);

class StateStore {
 public:
  // `js` (not owned) outlives the store. `stream` = --nats-stream.
  StateStore(jsCtx* js, const std::string& stream);

  // Looks the stream up and creates it when missing. False (with *error)
  // when JetStream does not answer.
  bool ensure(std::string* error);

  // The kept document of `kind`; nullopt when there is none, or with *error
  // set when JetStream did not answer.
  std::optional<state_pb::DurableDocument> kept(KeptDocument kind, std::string* error);
  // Keeps `document` as `kind`'s unless the kept one has the same or a later
  // stream_sequence. Concurrent writers: each write names the subject's last
  // message it read (ExpectLastSubjectSeq), a lost race is re-read and retried
  // (at most 5 attempts, then false with *error).
  bool keep(KeptDocument kind, const state_pb::DurableDocument& document, std::string* error);

  // The latest manifest (nullopt: none, or *error).
  std::optional<state_pb::SnapshotManifest> manifest(std::string* error);
  // The latest snapshot's state file, verified (chunks of its id, size,
  // XXH3). A chunk overwritten by a concurrent publisher is retried with the
  // newer manifest. False with *error; "" error = no snapshot published.
  bool fetch_snapshot(state_pb::SnapshotManifest* manifest, std::string* state_file,
                      std::string* error);
  // Publishes the chunks, then the manifest (readers never see a manifest
  // before its chunks), then purges chunk subjects a larger previous
  // snapshot left beyond this one's last.
  bool publish_snapshot(const SnapshotParts& parts, std::string* error);

 private:
  bool last(const std::string& subject, natsMsg** msg, std::string* error);
  // The last message on `subject` parsed as a `Message` (nullopt: none, or
  // *error: unreadable or unparsable).
  template <typename Message>
  std::optional<Message> last_parsed(const std::string& subject, std::string* error);
  bool publish(const std::string& subject, const std::string& body, std::uint64_t expect_last,
               std::string* error);
  std::string chunk_subject(std::uint32_t i) const;
  std::string kept_subject(KeptDocument kind) const;

  jsCtx* js_;
  std::string stream_;  // "<stream>_STATE"
  std::string prefix_;  // "<stream>.state."
  std::string manifest_subject_;
};

}  // namespace ic::replication
