#pragma once
// Added and special tokens of tokenizer.json ("added_tokens"): they are cut
// out of the raw text before normalization and pre-tokenization and become
// one token each, leftmost-longest first (tokenizers' AddedVocabulary with
// split_special_tokens = false). Only tokens without lstrip/rstrip/
// single_word are supported (Tokenizer::load rejects the others).

#include <array>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/bpe.hh"

namespace ic::tokenizer {

class AddedTokens {
 public:
  // Registers `content` (non-empty) as token `id`.
  void add(std::string content, TokenId id);

  // Calls f(segment, nullptr) for each run of ordinary text and
  // f(content, &id) for each added token, in order.
  template <typename F>
  void split(std::string_view text, F&& f) const;

  // True when no token was added.
  bool empty() const { return count_ == 0; }

  // The first position in [from, to) (to <= text.size()) whose byte starts
  // an added token, else `to`; `from` itself when from >= to. The scans jump
  // over ordinary text with it: memchr when every added token starts with
  // the same byte (Qwen's and Llama 3's all start with '<'), else a loop
  // over the first-byte table.
  std::size_t next_start(std::string_view text, std::size_t from, std::size_t to) const {
    if (from >= to) return from;
    if (only_first_ >= 0) {
      const void* hit = std::memchr(text.data() + from, only_first_, to - from);
      return hit == nullptr ? to
                            : static_cast<std::size_t>(static_cast<const char*>(hit) - text.data());
    }
    while (from < to && by_first_[static_cast<unsigned char>(text[from])].empty()) ++from;
    return from;
  }

  // The longest added token starting at text[pos] (pos < text.size()), or
  // nullptr: what split() cuts there.
  const std::pair<std::string, TokenId>* longest_at(std::string_view text, std::size_t pos) const {
    return by_first_[static_cast<unsigned char>(text[pos])].empty() ? nullptr : match_at(text, pos);
  }

 private:
  // Longest match of an added token at text[pos], or nullptr.
  const std::pair<std::string, TokenId>* match_at(std::string_view text, std::size_t pos) const;

  // Tokens by first byte, longest first.
  std::array<std::vector<std::pair<std::string, TokenId>>, 256> by_first_;
  std::size_t count_ = 0;
  int only_first_ = -1;  // the one first byte of every added token, or -1 (none or several)
};

// ---- implementation ----

template <typename F>
void AddedTokens::split(std::string_view text, F&& f) const {
  std::size_t run = 0;
  for (std::size_t pos = next_start(text, 0, text.size()); pos < text.size();
       pos = next_start(text, pos, text.size())) {
    const auto* hit = match_at(text, pos);
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    if (pos > run) f(text.substr(run, pos - run), static_cast<const TokenId*>(nullptr));
    f(std::string_view(hit->first), &hit->second);
    pos += hit->first.size();
    run = pos;
  }
  if (run < text.size()) f(text.substr(run), static_cast<const TokenId*>(nullptr));
}

}  // namespace ic::tokenizer
