#include "nats_admin.hh"

#include <nats/nats.h>

#include <stdexcept>

namespace ic::itest {
namespace {

// One connection and JetStream context for one call.
struct Js {
  natsConnection* conn = nullptr;
  jsCtx* js = nullptr;
  explicit Js(const std::string& url) {
    if (natsConnection_ConnectTo(&conn, url.c_str()) != NATS_OK ||
        natsConnection_JetStream(&js, conn, nullptr) != NATS_OK) {
      throw std::runtime_error("NATS not reached at " + url);
    }
  }
  ~Js() {
    jsCtx_Destroy(js);
    natsConnection_Destroy(conn);
  }
};

}  // namespace

void create_changes_stream(const std::string& url, const std::string& name,
                           std::chrono::milliseconds max_age, const std::string& subject) {
  Js c(url);
  const std::string subjects_of = subject.empty() ? name + ".changes" : subject;
  const char* subjects[] = {subjects_of.c_str()};
  jsStreamConfig cfg;
  jsStreamConfig_Init(&cfg);
  cfg.Name = name.c_str();
  cfg.Subjects = subjects;
  cfg.SubjectsLen = 1;
  cfg.Storage = js_FileStorage;
  cfg.MaxAge = static_cast<int64_t>(max_age.count()) * 1'000'000;
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = js_AddStream(&info, c.js, &cfg, nullptr, &code);
  jsStreamInfo_Destroy(info);
  if (s != NATS_OK) {
    throw std::runtime_error("stream " + name + " not created: " + natsStatus_GetText(s) +
                             " (JetStream error " + std::to_string(int{code}) + ")");
  }
}

namespace {

// One field of the stream's state; -1 when it cannot be read.
template <typename Field>
std::int64_t stream_state(const std::string& url, const std::string& name, Field field) {
  Js c(url);
  jsStreamInfo* info = nullptr;
  if (js_GetStreamInfo(&info, c.js, name.c_str(), nullptr, nullptr) != NATS_OK) return -1;
  const auto n = static_cast<std::int64_t>(field(info->State));
  jsStreamInfo_Destroy(info);
  return n;
}

}  // namespace

std::int64_t stream_messages(const std::string& url, const std::string& name) {
  return stream_state(url, name, [](const jsStreamState& s) { return s.Msgs; });
}

std::int64_t stream_last_sequence(const std::string& url, const std::string& name) {
  return stream_state(url, name, [](const jsStreamState& s) { return s.LastSeq; });
}

void delete_stream(const std::string& url, const std::string& name) {
  Js c(url);
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = js_DeleteStream(c.js, name.c_str(), nullptr, &code);
  if (s != NATS_OK) {
    throw std::runtime_error("stream " + name + " not deleted: " + natsStatus_GetText(s) +
                             " (JetStream error " + std::to_string(int{code}) + ")");
  }
}

bool publish_with_id(const std::string& url, const std::string& subject, const std::string& id,
                     const std::string& body) {
  Js c(url);
  natsMsg* msg = nullptr;
  natsStatus s =
      natsMsg_Create(&msg, subject.c_str(), nullptr, body.data(), static_cast<int>(body.size()));
  if (s == NATS_OK) s = natsMsgHeader_Set(msg, "Nats-Msg-Id", id.c_str());
  jsPubAck* ack = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  if (s == NATS_OK) s = js_PublishMsg(&ack, c.js, msg, nullptr, &code);
  natsMsg_Destroy(msg);
  const bool stored = s == NATS_OK && !ack->Duplicate;
  jsPubAck_Destroy(ack);
  if (s != NATS_OK) {
    throw std::runtime_error("publish " + id + ": " + natsStatus_GetText(s) + " (JetStream error " +
                             std::to_string(int{code}) + ")");
  }
  return stored;
}

}  // namespace ic::itest
