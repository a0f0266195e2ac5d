#include "grpc/call.hh"

#include <algorithm>

#include "grpc/call_state.hh"
#include "grpc/session.hh"
#include "metrics/registry.hh"

namespace ic::grpc {

bool CallHandle::alive() const {
  const auto s = state_.lock();
  return s && !s->finished;
}

bool CallHandle::write(const google::protobuf::MessageLite& message) {
  const auto s = state_.lock();
  if (!s || s->finished) return false;
  return s->session->send_message(*s, message);
}

bool CallHandle::send_headers() {
  const auto s = state_.lock();
  if (!s || s->finished) return false;
  s->session->send_headers(*s);
  return true;
}

bool CallHandle::write_frames(std::span<const std::byte> frames) {
  const auto s = state_.lock();
  if (!s || s->finished) return false;
  return s->session->send_frames(*s, frames);
}

std::size_t CallHandle::unsent_bytes() const {
  const auto s = state_.lock();
  return s ? s->session->unsent_bytes(*s) : 0;
}

void CallHandle::finish(const Status& status) {
  const auto s = state_.lock();
  if (!s || s->finished) return;
  s->session->finish_call(*s, status);
}

void CallHandle::reply(const google::protobuf::MessageLite& message) {
  if (write(message)) finish(Status::ok());
}

std::optional<std::int64_t> CallHandle::deadline_us() const {
  const auto s = state_.lock();
  return s ? s->deadline_us : std::nullopt;
}

unsigned CallHandle::core() const {
  const auto s = state_.lock();
  return s ? s->session->core() : 0;
}

void MethodTable::add(std::string path, Method method) {
  static constexpr metrics::RpcType kTypes[] = {
      metrics::RpcType::kUnary, metrics::RpcType::kClientStream, metrics::RpcType::kServerStream,
      metrics::RpcType::kBidiStream};
  method.rpc = metrics::local().rpc().declare(path, kTypes[static_cast<std::size_t>(method.kind)]);
  const auto it = methods_.insert_or_assign(std::move(path), std::move(method)).first;
  it->second.path = it->first;  // map nodes never move
}

const Method* MethodTable::find(std::string_view path) const {
  const auto it = methods_.find(path);
  return it == methods_.end() ? nullptr : &it->second;
}

std::vector<std::string> MethodTable::service_names() const {
  std::vector<std::string> names;
  for (const auto& [path, method] : methods_) {
    // "/pkg.Service/Method" → "pkg.Service"
    const auto slash = path.find('/', 1);
    if (path.empty() || path[0] != '/' || slash == std::string::npos) continue;
    names.push_back(path.substr(1, slash - 1));
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace ic::grpc
