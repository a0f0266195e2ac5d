#pragma once
// gRPC server reflection, grpc.reflection.v1 and grpc.reflection.v1alpha
// (grpc/doc/server-reflection.md), so grpcurl / grpc_cli can list and call
// the API. Answers from protobuf's generated DescriptorPool:
//   list_services            → every service in the method table (sorted)
//   file_by_filename         → the file, then its transitive imports
//   file_containing_symbol   → the defining file, then its transitive imports
//   file_containing_extension, all_extension_numbers_of_type → NOT_FOUND /
//                              empty (proto3 contract: no extensions)
// Errors travel in ErrorResponse messages; the stream stays open.

#include <string>
#include <string_view>
#include <vector>

#include "rpc/call.hh"

namespace ic::service {

// Serialized FileDescriptorProtos of `file` (a path such as
// "inferencecache/v1alpha1/inferencecache.proto") followed by its transitive
// dependencies, depth-first in import order, each once. Empty if the
// generated pool has no such file.
std::vector<std::string> file_with_dependencies(std::string_view file);

// Registers /grpc.reflection.v1.ServerReflection/ServerReflectionInfo and the
// v1alpha twin in `methods`. `methods` must outlive the sessions (the
// list_services answer reads its service names at call time).
void add_reflection(rpc::MethodTable& methods);

}  // namespace ic::service
