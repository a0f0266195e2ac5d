#pragma once
// Reading a quoted label value of the Prometheus text format 0.0.4, header-only so the
// kvevents adapter (engine /metrics) and the server (StreamMetrics, its own /metrics) share
// one reader without linking the metrics library. The writer is append_label_value
// (metrics/exposition.hh).

#include <cstddef>
#include <string>
#include <string_view>

namespace ic::metrics {

// Reads the label value that starts just past its opening quote at text[first]: a backslash
// escapes the next byte, `\n` is a newline. Appends the unescaped value to `value` and
// returns the index of the closing quote, or std::string_view::npos when the text ends first.
inline std::size_t read_label_value(std::string_view text, std::size_t first, std::string& value) {
  std::size_t i = first;
  for (; i < text.size() && text[i] != '"'; ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      ++i;
      value += text[i] == 'n' ? '\n' : text[i];
    } else {
      value += text[i];
    }
  }
  return i < text.size() ? i : std::string_view::npos;
}

}  // namespace ic::metrics
