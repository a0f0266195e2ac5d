#include "service/reflection.hh"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <memory>
#include <unordered_set>

#include "grpc/reflection/v1/reflection.pb.h"
#include "grpc/reflection/v1alpha/reflection.pb.h"
#include "rpc/typed.hh"

namespace ic::service {
namespace {

namespace gp = ::google::protobuf;

void collect(const gp::FileDescriptor* file, std::unordered_set<std::string>& seen,
             std::vector<std::string>& out) {
  if (!seen.insert(file->name()).second) return;
  gp::FileDescriptorProto proto;
  file->CopyTo(&proto);
  out.push_back(proto.SerializeAsString());
  for (int i = 0; i < file->dependency_count(); ++i) collect(file->dependency(i), seen, out);
}

// One bidi reflection stream; Pb is the v1 or v1alpha message namespace
// (identical shapes).
template <typename Request, typename Response>
class ReflectionHandler final : public rpc::CallHandler {
 public:
  ReflectionHandler(rpc::CallHandle call, const rpc::MethodTable& methods)
      : call_(std::move(call)), methods_(methods) {}

  void on_message(std::span<const std::byte> message) override {
    Request request;
    if (!rpc::parse_request(message, request, call_)) return;
    Response response;
    response.set_valid_host(request.host());
    *response.mutable_original_request() = request;
    answer(request, response);
    call_.write(response);
  }
  void on_half_close() override { call_.finish(rpc::Status::ok()); }

 private:
  void answer(const Request& request, Response& response) {
    const gp::DescriptorPool* pool = gp::DescriptorPool::generated_pool();
    switch (request.message_request_case()) {
      case Request::kListServices:
        for (const auto& name : methods_.service_names()) {
          response.mutable_list_services_response()->add_service()->set_name(name);
        }
        return;
      case Request::kFileByFilename:
        return files(pool->FindFileByName(request.file_by_filename()), response,
                     "file not found: " + request.file_by_filename());
      case Request::kFileContainingSymbol:
        return files(pool->FindFileContainingSymbol(request.file_containing_symbol()), response,
                     "symbol not found: " + request.file_containing_symbol());
      case Request::kAllExtensionNumbersOfType:
        if (pool->FindMessageTypeByName(request.all_extension_numbers_of_type()) != nullptr) {
          response.mutable_all_extension_numbers_response()->set_base_type_name(
              request.all_extension_numbers_of_type());
          return;
        }
        return error(response, rpc::StatusCode::kNotFound,
                     "type not found: " + request.all_extension_numbers_of_type());
      case Request::kFileContainingExtension:
        return error(response, rpc::StatusCode::kNotFound, "extension not found");
      case Request::MESSAGE_REQUEST_NOT_SET:
        break;
    }
    error(response, rpc::StatusCode::kInvalidArgument, "empty reflection request");
  }

  static void files(const gp::FileDescriptor* file, Response& response, std::string not_found) {
    if (file == nullptr) return error(response, rpc::StatusCode::kNotFound, std::move(not_found));
    std::unordered_set<std::string> seen;
    std::vector<std::string> out;
    collect(file, seen, out);
    for (auto& bytes : out) {
      response.mutable_file_descriptor_response()->add_file_descriptor_proto(std::move(bytes));
    }
  }

  static void error(Response& response, rpc::StatusCode code, std::string message) {
    auto* e = response.mutable_error_response();
    e->set_error_code(static_cast<int>(code));
    e->set_error_message(std::move(message));
  }

  rpc::CallHandle call_;
  const rpc::MethodTable& methods_;
};

template <typename Request, typename Response>
rpc::Method reflection_method(const rpc::MethodTable& methods) {
  rpc::Method m;
  m.kind = rpc::CallKind::kBidiStreaming;
  m.make = [&methods](rpc::CallHandle call) -> std::unique_ptr<rpc::CallHandler> {
    return std::make_unique<ReflectionHandler<Request, Response>>(std::move(call), methods);
  };
  return m;
}

}  // namespace

std::vector<std::string> file_with_dependencies(std::string_view file) {
  std::vector<std::string> out;
  const auto* fd = gp::DescriptorPool::generated_pool()->FindFileByName(std::string(file));
  if (fd == nullptr) return out;
  std::unordered_set<std::string> seen;
  collect(fd, seen, out);
  return out;
}

void add_reflection(rpc::MethodTable& methods) {
  namespace v1 = ::grpc::reflection::v1;
  namespace v1alpha = ::grpc::reflection::v1alpha;
  methods.add(
      "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
      reflection_method<v1::ServerReflectionRequest, v1::ServerReflectionResponse>(methods));
  methods.add(
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      reflection_method<v1alpha::ServerReflectionRequest, v1alpha::ServerReflectionResponse>(
          methods));
}

}  // namespace ic::service
