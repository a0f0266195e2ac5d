#include "chat_template/lexer.hh"

#include <cctype>

namespace ic::chat_template {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string at_line(int line) { return "line " + std::to_string(line) + ": "; }

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}
  std::vector<Token> run();

 private:
  void text_until_tag();
  void tag(char kind);
  void inner_token();
  void string_literal();
  void emit_text(std::string text);
  int line_at(std::size_t pos) const;

  std::string_view src_;
  std::size_t pos_ = 0;
  std::vector<Token> out_;
  bool strip_next_ = false;    // the previous tag ended with "-": strip leading whitespace
  bool trim_newline_ = false;  // trim_blocks: drop one "\n" after a block or comment tag
  int depth_ = 0;              // brackets open inside the current tag
};

int Lexer::line_at(std::size_t pos) const {
  int line = 1;
  for (std::size_t i = 0; i < pos && i < src_.size(); ++i) line += src_[i] == '\n';
  return line;
}

void Lexer::emit_text(std::string text) {
  if (text.empty()) return;
  out_.push_back({Token::kText, std::move(text), 0});
}

void Lexer::text_until_tag() {
  std::size_t end = pos_;
  while (end < src_.size()) {
    end = src_.find('{', end);
    if (end == std::string_view::npos) {
      end = src_.size();
      break;
    }
    const char next = end + 1 < src_.size() ? src_[end + 1] : '\0';
    if (next == '{' || next == '%' || next == '#') break;
    ++end;
  }
  std::string text(src_.substr(pos_, end - pos_));
  if (trim_newline_ && !text.empty() && text.front() == '\n') text.erase(0, 1);
  if (strip_next_) {
    std::size_t k = 0;
    while (k < text.size() && is_space(text[k])) ++k;
    text.erase(0, k);
  }
  trim_newline_ = strip_next_ = false;
  const std::size_t text_start = end - text.size();  // where the kept text begins in src_
  if (end < src_.size()) {
    const char kind = src_[end + 1];
    const char mod = end + 2 < src_.size() ? src_[end + 2] : '\0';
    if (mod == '-') {
      while (!text.empty() && is_space(text.back())) text.pop_back();
    } else if (kind != '{' && mod != '+') {
      // lstrip_blocks: spaces and tabs from a line start up to a block or
      // comment tag.
      std::size_t k = text.size();
      while (k > 0 && (text[k - 1] == ' ' || text[k - 1] == '\t')) --k;
      const bool line_start =
          k > 0 ? text[k - 1] == '\n' : text_start == 0 || src_[text_start - 1] == '\n';
      if (line_start) text.erase(k);
    }
  }
  // Jinja2 normalizes newlines in template text.
  std::string normalized;
  normalized.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r') {
      normalized += '\n';
      if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
    } else {
      normalized += text[i];
    }
  }
  emit_text(std::move(normalized));
  pos_ = end;
}

std::vector<Token> Lexer::run() {
  if (!src_.empty() && src_.back() == '\n') src_.remove_suffix(1);  // keep_trailing_newline off
  while (pos_ < src_.size()) {
    text_until_tag();
    if (pos_ >= src_.size()) break;
    tag(src_[pos_ + 1]);
  }
  out_.push_back({Token::kEof, "", line_at(src_.size())});
  return out_;
}

void Lexer::tag(char kind) {
  const int line = line_at(pos_);
  pos_ += 2;
  if (pos_ < src_.size() && (src_[pos_] == '-' || src_[pos_] == '+')) ++pos_;
  if (kind == '#') {
    const std::size_t close = src_.find("#}", pos_);
    if (close == std::string_view::npos) throw SyntaxError(at_line(line) + "unterminated comment");
    strip_next_ = close > pos_ && src_[close - 1] == '-';
    trim_newline_ = !(close > pos_ && src_[close - 1] == '+');
    pos_ = close + 2;
    return;
  }
  out_.push_back({kind == '{' ? Token::kVarBegin : Token::kBlockBegin, "", line});
  depth_ = 0;
  const char closer = kind == '{' ? '}' : '%';
  for (;;) {
    while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
    if (pos_ >= src_.size()) throw SyntaxError(at_line(line) + "unterminated tag");
    const bool dash = src_[pos_] == '-' || src_[pos_] == '+';
    const std::size_t at = pos_ + (dash ? 1 : 0);
    if (depth_ == 0 && at + 1 < src_.size() && src_[at] == closer && src_[at + 1] == '}') {
      strip_next_ = src_[pos_] == '-';
      trim_newline_ = kind == '%' && src_[pos_] != '+';
      pos_ = at + 2;
      out_.push_back({kind == '{' ? Token::kVarEnd : Token::kBlockEnd, "", line});
      return;
    }
    inner_token();
  }
}

void Lexer::inner_token() {
  const int line = line_at(pos_);
  const char c = src_[pos_];
  if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
    std::size_t end = pos_;
    while (end < src_.size() &&
           (std::isalnum(static_cast<unsigned char>(src_[end])) || src_[end] == '_'))
      ++end;
    out_.push_back({Token::kName, std::string(src_.substr(pos_, end - pos_)), line});
    pos_ = end;
    return;
  }
  if (std::isdigit(static_cast<unsigned char>(c))) {
    std::size_t end = pos_;
    while (end < src_.size() &&
           (std::isdigit(static_cast<unsigned char>(src_[end])) || src_[end] == '_'))
      ++end;
    bool is_float = false;
    if (end + 1 < src_.size() && src_[end] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
      is_float = true;
      ++end;
      while (end < src_.size() && std::isdigit(static_cast<unsigned char>(src_[end]))) ++end;
    }
    std::string digits;
    for (std::size_t i = pos_; i < end; ++i)
      if (src_[i] != '_') digits += src_[i];
    out_.push_back({is_float ? Token::kFloat : Token::kInt, digits, line});
    pos_ = end;
    return;
  }
  if (c == '\'' || c == '"') return string_literal();
  static constexpr std::string_view kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*",
                                              "/",  "%",  "~",  "<",  ">",  "(",  ")", "[", "]",
                                              "{",  "}",  ",",  ".",  ":",  "|",  "="};
  for (std::string_view op : kOps) {
    if (src_.substr(pos_, op.size()) == op) {
      if (op == "(" || op == "[" || op == "{") ++depth_;
      if ((op == ")" || op == "]" || op == "}") && depth_ > 0) --depth_;
      out_.push_back({Token::kOp, std::string(op), line});
      pos_ += op.size();
      return;
    }
  }
  throw SyntaxError(at_line(line) + "unexpected character '" + std::string(1, c) + "'");
}

void Lexer::string_literal() {
  const int line = line_at(pos_);
  const char quote = src_[pos_++];
  std::string value;
  while (pos_ < src_.size() && src_[pos_] != quote) {
    char c = src_[pos_++];
    if (c == '\\' && pos_ < src_.size()) {
      const char e = src_[pos_++];
      switch (e) {
        case 'n':
          c = '\n';
          break;
        case 't':
          c = '\t';
          break;
        case 'r':
          c = '\r';
          break;
        case '\\':
          c = '\\';
          break;
        case '\'':
          c = '\'';
          break;
        case '"':
          c = '"';
          break;
        default:
          value += '\\';
          c = e;
      }
    }
    value += c;
  }
  if (pos_ >= src_.size()) throw SyntaxError(at_line(line) + "unterminated string");
  ++pos_;
  out_.push_back({Token::kString, std::move(value), line});
}

}  // namespace

std::vector<Token> lex(std::string_view source) { return Lexer(source).run(); }

}  // namespace ic::chat_template
