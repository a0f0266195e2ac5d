#include <doctest/doctest.h>
#include <google/protobuf/descriptor.pb.h>

#include "grpc/reflection/v1/reflection.pb.h"
#include "grpc/reflection/v1alpha/reflection.pb.h"
#include "inferencecache/v1alpha1/inferencecache.pb.h"
#include "service/reflection.hh"
#include "service_fixture.hh"

using ic::test::frame;
using ic::test::ServiceFixture;
using ic::test::unframe;

namespace {

std::vector<std::string> names_of(const std::vector<std::string>& protos) {
  std::vector<std::string> names;
  for (const auto& bytes : protos) {
    google::protobuf::FileDescriptorProto p;
    REQUIRE(p.ParseFromString(bytes));
    names.push_back(p.name());
  }
  return names;
}

template <typename Request, typename Response>
std::vector<Response> exchange(ServiceFixture& f, const std::string& path,
                               const std::vector<Request>& requests) {
  std::string body;
  for (const auto& r : requests) body += frame(r.SerializeAsString());
  const auto id = f.client.grpc_call(path, body);
  f.run();
  CHECK(f.client.streams[id].trailer("grpc-status") == "0");
  std::vector<Response> out;
  for (const auto& m : unframe(f.client.streams[id].body)) {
    Response r;
    REQUIRE(r.ParseFromString(m));
    out.push_back(r);
  }
  return out;
}

const std::vector<std::string> kServices = {
    "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection", "inferencecache.v1alpha1.InferenceCache"};

}  // namespace

TEST_CASE("file_with_dependencies returns the file then its transitive imports") {
  // force the generated descriptors of the contract into the pool
  (void)inferencecache::v1alpha1::Ack::descriptor();
  CHECK(names_of(
            ic::service::file_with_dependencies("inferencecache/v1alpha1/inferencecache.proto")) ==
        std::vector<std::string>{"inferencecache/v1alpha1/inferencecache.proto"});
  // api.proto imports source_context.proto and type.proto; type.proto imports
  // any.proto and source_context.proto (sent once).
  CHECK(names_of(ic::service::file_with_dependencies("google/protobuf/api.proto")) ==
        std::vector<std::string>{"google/protobuf/api.proto",
                                 "google/protobuf/source_context.proto",
                                 "google/protobuf/type.proto", "google/protobuf/any.proto"});
  CHECK(ic::service::file_with_dependencies("no/such.proto").empty());
}

TEST_CASE_FIXTURE(ServiceFixture,
                  "reflection v1: list_services, file_by_filename, symbol, errors") {
  namespace v1 = ::grpc::reflection::v1;
  std::vector<v1::ServerReflectionRequest> reqs(6);
  reqs[0].set_list_services("*");
  reqs[0].set_host("localhost");
  reqs[1].set_file_by_filename("inferencecache/v1alpha1/inferencecache.proto");
  reqs[2].set_file_containing_symbol("inferencecache.v1alpha1.InferenceCache");
  reqs[3].set_file_containing_symbol("inferencecache.v1alpha1.LookupRouteRequest.model_id");
  reqs[4].set_file_by_filename("missing.proto");
  reqs[5].mutable_file_containing_extension()->set_containing_type("x.Y");
  const auto resp = exchange<v1::ServerReflectionRequest, v1::ServerReflectionResponse>(
      *this, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", reqs);
  REQUIRE(resp.size() == 6);

  std::vector<std::string> services;
  for (const auto& s : resp[0].list_services_response().service()) services.push_back(s.name());
  CHECK(services == kServices);
  CHECK(resp[0].valid_host() == "localhost");
  CHECK(resp[0].original_request().list_services() == "*");

  for (int i : {1, 2, 3}) {
    CAPTURE(i);
    const auto& files = resp[static_cast<std::size_t>(i)].file_descriptor_response();
    REQUIRE(files.file_descriptor_proto_size() == 1);
    google::protobuf::FileDescriptorProto p;
    REQUIRE(p.ParseFromString(files.file_descriptor_proto(0)));
    CHECK(p.name() == "inferencecache/v1alpha1/inferencecache.proto");
    CHECK(p.package() == "inferencecache.v1alpha1");
    REQUIRE(p.service_size() == 1);
    CHECK(p.service(0).method_size() == 8);
  }
  CHECK(resp[4].error_response().error_code() == 5);
  CHECK(resp[4].error_response().error_message() == "file not found: missing.proto");
  CHECK(resp[5].error_response().error_code() == 5);
}

TEST_CASE_FIXTURE(ServiceFixture, "reflection v1alpha lists the same services") {
  namespace va = ::grpc::reflection::v1alpha;
  std::vector<va::ServerReflectionRequest> reqs(2);
  reqs[0].set_list_services("");
  reqs[1].set_file_containing_symbol("grpc.health.v1.Health");
  const auto resp = exchange<va::ServerReflectionRequest, va::ServerReflectionResponse>(
      *this, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", reqs);
  REQUIRE(resp.size() == 2);
  std::vector<std::string> services;
  for (const auto& s : resp[0].list_services_response().service()) services.push_back(s.name());
  CHECK(services == kServices);
  google::protobuf::FileDescriptorProto p;
  REQUIRE(resp[1].file_descriptor_response().file_descriptor_proto_size() == 1);
  REQUIRE(p.ParseFromString(resp[1].file_descriptor_response().file_descriptor_proto(0)));
  CHECK(p.name() == "grpc/health/v1/health.proto");
}
