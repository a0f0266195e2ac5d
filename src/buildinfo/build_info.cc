#include "buildinfo/build_info.hh"

#include "buildinfo_config.h"

namespace ic::buildinfo {

const BuildInfo& build_info() {
  static const BuildInfo info{
      .version = IC_BUILD_VERSION,
      .git_commit = git_commit(),
      .build_type = IC_BUILD_TYPE,
      .compiler = IC_BUILD_COMPILER,
      .liburing = IC_BUILD_LIBURING,
      .nghttp2 = IC_BUILD_NGHTTP2,
      .protobuf = IC_BUILD_PROTOBUF,
      .openssl = IC_BUILD_OPENSSL,
  };
  return info;
}

std::string version_text(std::string_view program) {
  const BuildInfo& b = build_info();
  std::string out;
  const auto line = [&out](std::string_view key, std::string_view value) {
    out.append(key).append(": ").append(value).append("\n");
  };
  out.append(program).append(" ").append(b.version).append("\n");
  line("commit", b.git_commit);
  line("build", b.build_type);
  line("compiler", b.compiler);
  line("liburing", b.liburing);
  line("nghttp2", b.nghttp2);
  line("protobuf", b.protobuf);
  line("openssl", b.openssl);
  return out;
}

}  // namespace ic::buildinfo
