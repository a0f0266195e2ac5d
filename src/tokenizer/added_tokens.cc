#include "tokenizer/added_tokens.hh"

#include <algorithm>

namespace ic::tokenizer {

void AddedTokens::add(std::string content, TokenId id) {
  const auto first = static_cast<unsigned char>(content.front());
  if (count_ == 0)
    only_first_ = first;
  else if (only_first_ != first)
    only_first_ = -1;
  auto& bucket = by_first_[static_cast<unsigned char>(content.front())];
  for (auto& [text, existing] : bucket) {
    if (text == content) {  // the same content twice: the last id wins, as in tokenizers
      existing = id;
      return;
    }
  }
  bucket.emplace_back(std::move(content), id);
  std::stable_sort(bucket.begin(), bucket.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  ++count_;
}

const std::pair<std::string, TokenId>* AddedTokens::match_at(std::string_view text,
                                                             std::size_t pos) const {
  const std::string_view rest = text.substr(pos);
  for (const auto& entry : by_first_[static_cast<unsigned char>(text[pos])]) {
    if (rest.starts_with(entry.first)) return &entry;
  }
  return nullptr;
}

}  // namespace ic::tokenizer
