#include "base/check.hh"

#include <cstdlib>

#include "base/log.hh"

namespace ic::base {

void check_failed(std::string_view condition, std::string_view what, std::string_view file,
                  int line) {
  log_now(LogLevel::error, "invariant violated",
          {{"check", condition}, {"what", what}, {"file", file}, {"line", line}});
  std::abort();
}

}  // namespace ic::base
