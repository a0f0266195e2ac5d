#include "tokenizer/encoding.hh"

#include <algorithm>

#include "tokenizer/normalizer.hh"
#include "tokenizer/utf8.hh"

namespace ic::tokenizer {
namespace {

// Bytes of UTF-8 validation or added-token scan per unit.
constexpr std::size_t kScanChunk = 64 * 1024;
// NFC: a piece is cut at the first safe place past this many bytes.
constexpr std::size_t kNfcChunk = 4 * 1024;
// The regex first sees this many bytes past its start; a partial match
// doubles it (up to Encoding::kMaxPretokenBytes).
constexpr std::size_t kFirstWindow = 4 * 1024;
// Work (bytes, or a unit of merge steps) between two polls of `stop`.
constexpr std::size_t kPollBytes = 4 * 1024;
// Merge steps of a long word per unit.
constexpr std::size_t kMergeSteps = 1024;

bool continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// `pos` moved forward to a code point boundary of valid UTF-8 `s` (or s.size()).
std::size_t boundary(std::string_view s, std::size_t pos) {
  if (pos >= s.size()) return s.size();
  while (pos < s.size() && continuation(s[pos])) ++pos;
  return pos;
}

// The quick check of to_nfc(): only lead bytes from 0xCC start code points
// that NFC may change.
bool may_change_in_nfc(std::string_view s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) >= 0xCC; });
}

}  // namespace

Encoding::Encoding(const Tokenizer& tokenizer, std::string_view text, std::vector<TokenId>& out)
    : tok_(tokenizer), text_(text), out_(out) {
  out_.clear();
}

EncodeStatus Encoding::step(Workspace& ws, const std::function<bool()>& stop) {
  work_ = 0;
  if (stage_ != Stage::kDone && stop && stop()) return EncodeStatus::kPaused;
  while (stage_ != Stage::kDone) {
    const EncodeStatus status = run_unit(ws);
    ++units_;
    if (status != EncodeStatus::kOk) return status;
    if (work_ >= kPollBytes) {
      work_ = 0;
      if (stage_ != Stage::kDone && stop && stop()) return EncodeStatus::kPaused;
    }
  }
  return EncodeStatus::kOk;
}

EncodeStatus Encoding::run_unit(Workspace& ws) {
  switch (stage_) {
    case Stage::kValidate:
      return validate_unit();
    case Stage::kScanAdded:
      return scan_added_unit();
    case Stage::kPiece:
      return piece_unit();
    case Stage::kNormalize:
      return normalize_unit(ws);
    case Stage::kSplit:
      return split_unit(ws);
    case Stage::kLongWord:
      return long_word_unit();
    case Stage::kDone:
      break;
  }
  return EncodeStatus::kOk;
}

// A chunk ends before a byte that starts a code point (or 3 bytes later,
// where valid UTF-8 must have one), so the chunks are valid iff the text is.
EncodeStatus Encoding::validate_unit() {
  std::size_t end = std::min(text_.size(), pos_ + kScanChunk);
  for (int k = 0; k < 3 && end < text_.size() && continuation(text_[end]); ++k) ++end;
  if (!valid_utf8(text_.substr(pos_, end - pos_))) return EncodeStatus::kInvalidUtf8;
  work_ += end - pos_;
  pos_ = end;
  if (pos_ < text_.size()) return EncodeStatus::kOk;
  pos_ = 0;
  stage_ = Stage::kScanAdded;
  return EncodeStatus::kOk;
}

// The added tokens cut out leftmost-longest, as AddedTokens::split does.
EncodeStatus Encoding::scan_added_unit() {
  if (tok_.added_.empty()) {
    if (!text_.empty()) pieces_.push_back({0, text_.size(), -1});
    pos_ = text_.size();
  }
  const std::size_t end = std::min(text_.size(), pos_ + kScanChunk);
  work_ += end - pos_;
  while ((pos_ = tok_.added_.next_start(text_, pos_, end)) < end) {
    const auto* hit = tok_.added_.longest_at(text_, pos_);
    if (hit == nullptr) {
      ++pos_;
      continue;
    }
    if (pos_ > run_) pieces_.push_back({run_, pos_, -1});
    pieces_.push_back({pos_, pos_ + hit->first.size(), static_cast<std::int64_t>(hit->second)});
    pos_ += hit->first.size();
    run_ = pos_;
  }
  if (pos_ < text_.size()) return EncodeStatus::kOk;
  if (!tok_.added_.empty() && run_ < text_.size()) pieces_.push_back({run_, text_.size(), -1});
  stage_ = Stage::kPiece;
  return EncodeStatus::kOk;
}

EncodeStatus Encoding::piece_unit() {
  if (piece_ == pieces_.size()) {
    stage_ = Stage::kDone;
    return EncodeStatus::kOk;
  }
  const Piece& p = pieces_[piece_];
  if (p.id >= 0) {
    out_.push_back(static_cast<TokenId>(p.id));
    ++piece_;
    work_ += 16;
    return EncodeStatus::kOk;
  }
  const std::string_view raw = text_.substr(p.begin, p.end - p.begin);
  work_ += raw.size() / 8;  // the quick check below reads it
  if (tok_.nfc_ && may_change_in_nfc(raw)) {
    normalized_.clear();
    seg_pos_ = 0;
    stage_ = Stage::kNormalize;
    return EncodeStatus::kOk;
  }
  start_split(raw);
  return EncodeStatus::kOk;
}

// NFC of the current piece up to the first safe cut past kNfcChunk bytes.
EncodeStatus Encoding::normalize_unit(Workspace& ws) {
  const Piece& p = pieces_[piece_];
  const std::string_view raw = text_.substr(p.begin, p.end - p.begin);
  std::size_t i = seg_pos_, cut = raw.size(), last_safe = seg_pos_;
  while (i < raw.size()) {
    const std::size_t at = i;
    const char32_t cp = next_code_point(raw, i);
    if (at > seg_pos_ && nfc_cut_before(cp)) {
      last_safe = at;
      if (at - seg_pos_ >= kNfcChunk) {
        cut = at;
        break;
      }
    } else if (at - last_safe > kMaxNfcStretchBytes) {
      return EncodeStatus::kTooLong;
    }
  }
  const std::string_view part = raw.substr(seg_pos_, cut - seg_pos_);
  switch (to_nfc(part, ws.normalized_)) {
    case NfcResult::kUnchanged:
      normalized_.append(part);
      break;
    case NfcResult::kWritten:
      normalized_.append(ws.normalized_);
      break;
    case NfcResult::kFailed:
      return EncodeStatus::kInvalidUtf8;
  }
  work_ += part.size();
  seg_pos_ = cut;
  if (seg_pos_ == raw.size()) start_split(normalized_);
  return EncodeStatus::kOk;
}

void Encoding::start_split(std::string_view segment) {
  segment_ = segment;
  gap_ = from_ = 0;
  window_ = kFirstWindow;
  stage_ = Stage::kSplit;
}

// One regex search through a window; a piece found is encoded at once (or
// its long merge started). A gap before a match is encoded in its own unit.
EncodeStatus Encoding::split_unit(Workspace& ws) {
  const std::string_view seg = segment_;
  if (from_ >= seg.size()) {
    if (gap_ < seg.size()) {
      const std::size_t g = gap_;
      gap_ = seg.size();
      word(seg.substr(g), ws);
      return EncodeStatus::kOk;
    }
    ++piece_;
    stage_ = Stage::kPiece;
    return EncodeStatus::kOk;
  }
  const std::size_t window_end = boundary(seg, from_ + window_);
  std::size_t start = 0, end = 0;
  const int found = tok_.split_->next_in_window(seg, from_, window_end, ws.regex_, start, end);
  if (found < 0) return EncodeStatus::kRegexError;
  if (found == 2) {  // a match may reach past the window: look again through a wider one
    work_ += window_end - from_;
    if (window_ >= kMaxPretokenBytes) return EncodeStatus::kTooLong;
    window_ *= 2;
    return EncodeStatus::kOk;
  }
  if (found == 0) {  // no match starts before window_end: the gap goes on
    work_ += window_end - from_;
    from_ = window_end;
    if (from_ < seg.size() && from_ - gap_ > kMaxPretokenBytes) return EncodeStatus::kTooLong;
    return EncodeStatus::kOk;
  }
  window_ = kFirstWindow;
  if (end == start) {  // an empty match makes no piece: search on after it
    from_ = boundary(seg, start + 1);
    work_ += 1;
    return EncodeStatus::kOk;
  }
  if (start > gap_) {  // the gap first; the match is found again from its start
    const std::size_t g = gap_;
    gap_ = from_ = start;
    word(seg.substr(g, start - g), ws);
    return EncodeStatus::kOk;
  }
  gap_ = from_ = end;
  word(seg.substr(start, end - start), ws);
  return EncodeStatus::kOk;
}

void Encoding::word(std::string_view w, Workspace& ws) {
  work_ += w.size() + 8;
  if (w.size() <= kLongWordBytes) {
    tok_.encode_word(w, ws, out_);
    return;
  }
  if (!tok_.bpe_->begin_word(w, long_, out_)) stage_ = Stage::kLongWord;
}

EncodeStatus Encoding::long_word_unit() {
  work_ += kPollBytes;  // a poll after each unit of merge steps
  if (!tok_.bpe_->merge_steps(long_, kMergeSteps)) return EncodeStatus::kOk;
  tok_.bpe_->finish_word(long_, out_);
  stage_ = Stage::kSplit;
  return EncodeStatus::kOk;
}

}  // namespace ic::tokenizer
