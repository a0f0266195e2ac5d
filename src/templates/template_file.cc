#include "templates/template_file.hh"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>

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

TemplatesFile::TemplatesFile(std::string path, std::int32_t default_block_size)
    : path_(std::move(path)), default_block_size_(default_block_size) {}

TemplatesFile::Identity TemplatesFile::identify() const {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return Identity{};
  return Identity{true, st.st_mtim, st.st_size, st.st_ino};
}

TemplateParseResult TemplatesFile::read() {
  // Identify before reading: a write racing the read shows up as a change at
  // the next poll and is read again.
  attempted_ = true;
  attempted_id_ = identify();
  return read_templates_file(path_, default_block_size_);
}

std::optional<TemplateParseResult> TemplatesFile::poll() {
  if (attempted_ && identify() == attempted_id_) return std::nullopt;
  return read();
}

}  // namespace ic::templates
