#include "gateway/json_outline.hh"

#include <cstddef>
#include <cstring>

namespace ic::gateway {
namespace {

class Scanner {
 public:
  Scanner(std::string_view text, int max_depth) : s_(text), max_depth_(max_depth) {}

  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t'))
      ++i_;
  }
  bool take(char c) {
    skip_space();
    if (i_ >= s_.size() || s_[i_] != c) return false;
    ++i_;
    return true;
  }
  bool peek(char c) {
    skip_space();
    return i_ < s_.size() && s_[i_] == c;
  }
  bool at_end() {
    skip_space();
    return i_ == s_.size();
  }

  // A string starting at i_ (its quote); `out` its bytes with the quotes.
  bool string(std::string_view& out) {
    const std::size_t begin = i_;
    if (i_ >= s_.size() || s_[i_] != '"') return false;
    // Most of a chat body is string bytes: jump from quote to quote (memchr);
    // a quote ends the string unless an odd run of backslashes escapes it.
    for (std::size_t from = i_ + 1;;) {
      const void* q = std::memchr(s_.data() + from, '"', s_.size() - from);
      if (q == nullptr) return false;
      const std::size_t at = static_cast<std::size_t>(static_cast<const char*>(q) - s_.data());
      std::size_t slashes = 0;
      while (at - slashes > begin + 1 && s_[at - slashes - 1] == '\\') ++slashes;
      from = at + 1;
      if (slashes % 2 == 0) {
        i_ = at + 1;
        out = s_.substr(begin, i_ - begin);
        return true;
      }
    }
  }

  // Any value starting here; `out` its bytes as written.
  bool value(std::string_view& out) {
    skip_space();
    if (i_ >= s_.size()) return false;
    const std::size_t begin = i_;
    const char c = s_[i_];
    if (c == '"') return string(out);
    if (c == '{' || c == '[') {
      if (!nested()) return false;
    } else {
      while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != ']' && s_[i_] != '}' && s_[i_] != ' ' &&
             s_[i_] != '\n' && s_[i_] != '\r' && s_[i_] != '\t')
        ++i_;
      if (i_ == begin) return false;
    }
    out = s_.substr(begin, i_ - begin);
    return true;
  }

  std::size_t position() const { return i_; }

 private:
  // An object or array from its opening bracket to the matching close,
  // strings skipped, bracket kinds matched, depth bounded.
  bool nested() {
    char stack[256] = {};  // the closing bracket each open level expects
    int depth = 0;
    const int limit = max_depth_ < 256 ? max_depth_ : 256;
    for (; i_ < s_.size(); ++i_) {
      const char c = s_[i_];
      if (c == '"') {
        std::string_view ignored;
        if (!string(ignored)) return false;
        --i_;
      } else if (c == '{' || c == '[') {
        if (depth >= limit) return false;
        stack[depth++] = c == '{' ? '}' : ']';
      } else if (c == '}' || c == ']') {
        if (depth == 0 || stack[depth - 1] != c) return false;
        if (--depth == 0) {
          ++i_;
          return true;
        }
      }
    }
    return false;
  }

  std::string_view s_;
  int max_depth_;
  std::size_t i_ = 0;
};

}  // namespace

bool outline_json(std::string_view body, JsonOutline& out, int max_depth) {
  // Cleared member by member: the messages' capacity stays for the next body.
  out.model = {};
  out.tools = {};
  out.has_messages = false;
  out.messages.clear();
  Scanner s(body, max_depth);
  if (!s.take('{')) return false;
  bool first = true;
  while (!s.peek('}')) {
    if (!first && !s.take(',')) return false;
    first = false;
    s.skip_space();
    std::string_view key;
    if (!s.string(key) || !s.take(':')) return false;
    s.skip_space();
    if (key == "\"messages\"" && s.peek('[')) {
      out.has_messages = true;
      out.messages.clear();
      s.take('[');
      bool first_element = true;
      while (!s.peek(']')) {
        if (!first_element && !s.take(',')) return false;
        first_element = false;
        std::string_view element;
        if (!s.value(element)) return false;
        out.messages.push_back(element);
      }
      s.take(']');
      continue;
    }
    std::string_view value;
    if (!s.value(value)) return false;
    if (key == "\"model\"") {
      out.model = value;
    } else if (key == "\"tools\"") {
      out.tools = value;
    } else if (key == "\"messages\"") {
      out.has_messages = false;  // not an array
      out.messages.clear();
    }
  }
  return s.take('}') && s.at_end();
}

}  // namespace ic::gateway
