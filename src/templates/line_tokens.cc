#include "templates/line_tokens.hh"

#include <xxhash.h>

#include "prompt_text/encoder.hh"

namespace ic::templates {
namespace {

// As stable_cut (stable_prefix.cc): a position right after '\n' at a
// printable ASCII character other than space.
bool cut_at(std::string_view text, std::size_t c) {
  return c > 0 && c < text.size() && text[c - 1] == '\n' && text[c] > ' ' && text[c] < 0x7f;
}

}  // namespace

std::size_t piece_end(std::string_view text, std::size_t from) {
  std::size_t c = from + LineTokens::kMinPieceBytes;
  while (c < text.size()) {
    const std::size_t nl = text.find('\n', c - 1);
    if (nl == std::string_view::npos || nl + 1 >= text.size()) return text.size();
    c = nl + 1;
    if (cut_at(text, c)) return c;
    ++c;  // the next '\n' at or after c
  }
  return text.size();
}

LineTokens& LineTokens::local() {
  thread_local LineTokens cache;
  return cache;
}

tokenizer::EncodeStatus LineTokens::encode(const tokenizer::Tokenizer& tokenizer,
                                           std::string_view text,
                                           std::vector<tokenizer::TokenId>& out,
                                           const std::function<bool()>& expired) {
  LineEncoding job(*this, tokenizer, text, out);
  const auto status = job.step(expired);
  return status == tokenizer::EncodeStatus::kPaused ? tokenizer::EncodeStatus::kDeadline : status;
}

bool LineTokens::lookup(const tokenizer::Tokenizer& tokenizer, std::uint64_t low,
                        std::uint64_t high, std::vector<tokenizer::TokenId>& out) {
  // Two ways: the piece's slot pair {i, i ^ 1}.
  const std::size_t i = low % kSlots;
  for (const std::size_t at : {i, i ^ 1}) {
    const Slot& s = slots_[at];
    if (s.tokenizer == &tokenizer && s.low == low && s.high == high) {
      ++hits_;
      out.insert(out.end(), s.ids.begin(), s.ids.end());
      return true;
    }
  }
  ++misses_;
  return false;
}

void LineTokens::remember(const tokenizer::Tokenizer& tokenizer, std::uint64_t low,
                          std::uint64_t high, const std::vector<tokenizer::TokenId>& ids) {
  // A miss goes to an empty way, else to the way the hash picks.
  const std::size_t i = low % kSlots;
  Slot& slot = slots_[slots_[i].tokenizer == nullptr       ? i
                      : slots_[i ^ 1].tokenizer == nullptr ? i ^ 1
                      : (high & 1) != 0                    ? i ^ 1
                                                           : i];
  const std::size_t held = cached_ids_ - slot.ids.size();
  if (held + ids.size() > kMaxCachedIds) return;
  cached_ids_ = held + ids.size();
  slot.ids.assign(ids.begin(), ids.end());
  slot.low = low;
  slot.high = high;
  slot.tokenizer = &tokenizer;
}

LineEncoding::LineEncoding(LineTokens& cache, const tokenizer::Tokenizer& tokenizer,
                           std::string_view text, std::vector<tokenizer::TokenId>& out)
    : cache_(cache), tokenizer_(tokenizer), text_(text), out_(out) {
  out_.clear();
}

tokenizer::EncodeStatus LineEncoding::step(const std::function<bool()>& stop) {
  while (piece_ || from_ < text_.size()) {
    if (!piece_) {
      if (stop && stop()) return tokenizer::EncodeStatus::kPaused;
      to_ = piece_end(text_, from_);
      const std::string_view piece = text_.substr(from_, to_ - from_);
      const XXH128_hash_t h = XXH3_128bits(piece.data(), piece.size());
      low_ = h.low64;
      high_ = h.high64;
      if (cache_.lookup(tokenizer_, low_, high_, out_)) {
        from_ = to_;
        continue;
      }
      piece_.emplace(tokenizer_, piece, ids_);
    }
    const auto status = piece_->step(prompt_text::thread_workspace(), stop);
    if (status != tokenizer::EncodeStatus::kOk) return status;
    piece_.reset();
    out_.insert(out_.end(), ids_.begin(), ids_.end());
    cache_.remember(tokenizer_, low_, high_, ids_);
    from_ = to_;
  }
  return tokenizer::EncodeStatus::kOk;
}

}  // namespace ic::templates
