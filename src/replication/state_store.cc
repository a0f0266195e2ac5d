#include "replication/state_store.hh"

#include <vector>

namespace ic::replication {
namespace {

constexpr int kKeepAttempts = 5;
constexpr int kFetchAttempts = 3;
constexpr jsErrCode kWrongLastSequence = JSStreamWrongLastSequenceErr;

std::string status_text(natsStatus s, jsErrCode code) {
  std::string text = natsStatus_GetText(s);
  if (const char* last = nats_GetLastError(nullptr); last != nullptr && *last != '\0') {
    text += ": ";
    text += last;
  }
  if (code != 0) text += " (JetStream error " + std::to_string(int{code}) + ")";
  return text;
}

template <typename Message>
bool parse_body(natsMsg* msg, Message* out) {
  return out->ParseFromArray(natsMsg_GetData(msg), natsMsg_GetDataLength(msg));
}

}  // namespace

const char* kept_document_name(KeptDocument kind) {
  switch (kind) {
    case KeptDocument::kPolicy:
      return "policy";
    case KeptDocument::kTemplates:
      return "templates";
  }
  return "unknown";
}

StateStore::StateStore(jsCtx* js, const std::string& stream)
    : js_(js),
      stream_(stream + "_STATE"),
      prefix_(stream + ".state."),
      manifest_subject_(prefix_ + "snapshot.manifest") {}

std::string StateStore::chunk_subject(std::uint32_t i) const {
  return prefix_ + "snapshot.chunk." + std::to_string(i);
}

std::string StateStore::kept_subject(KeptDocument kind) const {
  return prefix_ + kept_document_name(kind);
}

bool StateStore::ensure(std::string* error) {
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&info, js_, stream_.c_str(), nullptr, &code);
  if (s == NATS_NOT_FOUND) {
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    cfg.Name = stream_.c_str();
    const std::string all = prefix_ + ">";
    const char* subjects[] = {all.c_str()};
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    cfg.MaxMsgsPerSubject = 1;  // only the latest document, manifest and chunk i
    s = js_AddStream(&info, js_, &cfg, nullptr, &code);
    // Another server created it meanwhile: fine.
    if (s != NATS_OK && code == JSStreamNameExistErr) s = NATS_OK;
  }
  jsStreamInfo_Destroy(info);
  if (s != NATS_OK) *error = "stream " + stream_ + ": " + status_text(s, code);
  return s == NATS_OK;
}

bool StateStore::last(const std::string& subject, natsMsg** msg, std::string* error) {
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = js_GetLastMsg(msg, js_, stream_.c_str(), subject.c_str(), nullptr, &code);
  if (s == NATS_OK) return true;
  *msg = nullptr;
  // No message on the subject, or no stream yet: nothing kept, not an error.
  if (s != NATS_NOT_FOUND && code != JSStreamNotFoundErr && code != JSNoMessageFoundErr) {
    *error = subject + ": " + status_text(s, code);
  }
  return false;
}

bool StateStore::publish(const std::string& subject, const std::string& body,
                         std::uint64_t expect_last, std::string* error) {
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.ExpectLastSubjectSeq = expect_last;
  jsPubAck* ack = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = js_Publish(&ack, js_, subject.c_str(), body.data(),
                                  static_cast<int>(body.size()), &po, &code);
  jsPubAck_Destroy(ack);
  if (s == NATS_OK) return true;
  *error = code == kWrongLastSequence ? "race" : subject + ": " + status_text(s, code);
  return false;
}

template <typename Message>
std::optional<Message> StateStore::last_parsed(const std::string& subject, std::string* error) {
  natsMsg* msg = nullptr;
  if (!last(subject, &msg, error)) return std::nullopt;
  Message parsed;
  const bool ok = parse_body(msg, &parsed);
  natsMsg_Destroy(msg);
  if (!ok) {
    *error = subject + ": unparsable";
    return std::nullopt;
  }
  return parsed;
}

std::optional<state_pb::DurableDocument> StateStore::kept(KeptDocument kind, std::string* error) {
  return last_parsed<state_pb::DurableDocument>(kept_subject(kind), error);
}

bool StateStore::keep(KeptDocument kind, const state_pb::DurableDocument& document,
                      std::string* error) {
  const std::string subject = kept_subject(kind);
  const std::string body = document.SerializeAsString();
  for (int attempt = 0; attempt < kKeepAttempts; ++attempt) {
    natsMsg* msg = nullptr;
    error->clear();
    if (!last(subject, &msg, error) && !error->empty()) return false;
    std::uint64_t expect = 0;
    if (msg != nullptr) {
      state_pb::DurableDocument kept;
      const bool newer =
          parse_body(msg, &kept) && kept.stream_sequence() >= document.stream_sequence();
      expect = natsMsg_GetSequence(msg);
      natsMsg_Destroy(msg);
      if (newer) return true;
    }
    // Without a kept message there is nothing to name: write, then re-read
    // (a concurrent first write of an older document is overwritten next turn).
    if (!publish(subject, body, expect, error) && *error != "race") return false;
  }
  *error = subject + ": still contended after " + std::to_string(kKeepAttempts) + " attempts";
  return false;
}

std::optional<state_pb::SnapshotManifest> StateStore::manifest(std::string* error) {
  return last_parsed<state_pb::SnapshotManifest>(manifest_subject_, error);
}

bool StateStore::fetch_snapshot(state_pb::SnapshotManifest* manifest_out, std::string* state_file,
                                std::string* error) {
  for (int attempt = 0; attempt < kFetchAttempts; ++attempt) {
    error->clear();
    std::optional<state_pb::SnapshotManifest> m = manifest(error);
    if (!m) return false;
    std::vector<std::string> chunks;
    for (std::uint32_t i = 0; i < m->chunks(); ++i) {
      natsMsg* msg = nullptr;
      if (!last(chunk_subject(i), &msg, error)) break;
      chunks.emplace_back(natsMsg_GetData(msg),
                          static_cast<std::size_t>(natsMsg_GetDataLength(msg)));
      natsMsg_Destroy(msg);
    }
    if (!error->empty()) return false;
    if (join_snapshot(*m, chunks, state_file, error)) {
      *manifest_out = std::move(*m);
      return true;
    }
  }
  *error = "snapshot not read whole: " + *error;
  return false;
}

bool StateStore::publish_snapshot(const SnapshotParts& parts, std::string* error) {
  std::string ignored;
  const std::optional<state_pb::SnapshotManifest> previous = manifest(&ignored);
  for (std::uint32_t i = 0; i < parts.chunks.size(); ++i) {
    if (!publish(chunk_subject(i), parts.chunks[i], 0, error)) return false;
  }
  if (!publish(manifest_subject_, parts.manifest.SerializeAsString(), 0, error)) return false;
  const std::uint32_t stale = previous ? previous->chunks() : 0;
  for (std::uint32_t i = parts.manifest.chunks(); i < stale; ++i) {
    jsOptions o;
    jsOptions_Init(&o);
    const std::string subject = chunk_subject(i);
    o.Stream.Purge.Subject = subject.c_str();
    js_PurgeStream(js_, stream_.c_str(), &o, nullptr);
  }
  return true;
}

}  // namespace ic::replication
