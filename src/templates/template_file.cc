#include "templates/template_file.hh"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace ic::templates {

TemplateParseResult read_templates_file(const std::string& path, std::int32_t default_block_size) {
  TemplateParseResult result;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    result.error = path + ": " + std::strerror(errno);
    return result;
  }
  std::string body;
  char buf[16384];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    body.append(buf, static_cast<std::size_t>(in.gcount()));
    if (body.size() > kMaxDocumentBytes) {
      result.error = path + ": larger than 1 MiB";
      return result;
    }
  }
  if (in.bad()) {
    result.error = path + ": read failed";
    return result;
  }
  result = parse_templates_json(body, default_block_size);
  if (!result.ok()) result.error = path + ": " + result.error;
  return result;
}

}  // namespace ic::templates
