#include "rpc/call.hh"

#include <algorithm>

#include "metrics/registry.hh"

namespace ic::rpc {

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

}  // namespace ic::rpc
