#pragma once
// `--templates-file PATH` (docs/templates.md "Two ways in"): the template
// document read from a file at startup and again on SIGHUP.

#include <cstdint>
#include <string>

#include "templates/template_set.hh"

namespace ic::templates {

// Reads and parses the document at `path` (at most kMaxDocumentBytes).
// Errors name the path ("PATH: No such file or directory",
// "PATH: larger than 1 MiB", "PATH: templates[0]: …").
TemplateParseResult read_templates_file(const std::string& path, std::int32_t default_block_size);

}  // namespace ic::templates
