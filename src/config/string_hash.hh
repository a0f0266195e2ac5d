#pragma once
// Transparent string hash for maps keyed by std::string, so lookups by
// string_view never allocate.

#include <cstddef>
#include <functional>
#include <string_view>

namespace ic::config {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};

}  // namespace ic::config
