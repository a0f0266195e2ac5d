#include "tokenizer/bpe.hh"

#include <algorithm>
#include <bit>

#include "tokenizer/byte_level.hh"

namespace ic::tokenizer {
namespace {

constexpr std::uint64_t kEmptyKey = UINT64_MAX;
// Words up to this many bytes use the array merge (scan for the lowest rank,
// shift); longer ones a heap over a linked list (n log n instead of n²).
constexpr std::size_t kSmallWord = 48;

std::uint64_t pair_key(TokenId left, TokenId right) {
  return (static_cast<std::uint64_t>(left) << 32) | right;
}

std::size_t slot_of(std::uint64_t key, std::uint64_t mask) {
  return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> 20) & mask;
}

}  // namespace

std::unique_ptr<BpeModel> BpeModel::build(
    const std::vector<std::pair<std::string, TokenId>>& vocab,
    const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges,
    std::string& error) {
  auto model = std::unique_ptr<BpeModel>(new BpeModel());
  model->ignore_merges_ = ignore_merges;
  model->vocab_.reserve(vocab.size());
  // Byte-level strings → raw bytes; also by byte-level string for merges.
  std::unordered_map<std::string_view, TokenId> by_text;
  by_text.reserve(vocab.size());
  for (const auto& [text, id] : vocab) {
    by_text.emplace(text, id);
    if (auto raw = decode_byte_level(text)) model->vocab_.emplace(std::move(*raw), id);
  }
  for (unsigned b = 0; b < 256; ++b) {
    const char byte = static_cast<char>(b);
    const auto it = model->vocab_.find(std::string_view(&byte, 1));
    if (it == model->vocab_.end()) {
      error = "byte " + std::to_string(b) + " has no token in the vocabulary";
      return nullptr;
    }
    model->byte_ids_[b] = it->second;
  }
  const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(16, merges.size() * 2));
  model->merge_keys_.assign(capacity, kEmptyKey);
  model->merge_values_.assign(capacity, Merge{});
  model->merge_mask_ = capacity - 1;
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const auto l = by_text.find(left), r = by_text.find(right), m = by_text.find(left + right);
    if (l == by_text.end() || r == by_text.end() || m == by_text.end()) {
      error = "merge " + std::to_string(rank) + " (\"" + left + "\" \"" + right +
              "\") names a token missing from the vocabulary";
      return nullptr;
    }
    // A repeated pair keeps its first (lowest) rank, as tokenizers does.
    if (model->find_merge(l->second, r->second).rank != kNoMerge) continue;
    model->insert_merge(l->second, r->second, Merge{static_cast<std::uint32_t>(rank), m->second});
    ++model->merge_count_;
  }
  return model;
}

BpeModel::Merge BpeModel::find_merge(TokenId left, TokenId right) const {
  const std::uint64_t key = pair_key(left, right);
  for (std::size_t i = slot_of(key, merge_mask_);; i = (i + 1) & merge_mask_) {
    if (merge_keys_[i] == key) return merge_values_[i];
    if (merge_keys_[i] == kEmptyKey) return Merge{};
  }
}

void BpeModel::insert_merge(TokenId left, TokenId right, Merge merge) {
  const std::uint64_t key = pair_key(left, right);
  std::size_t i = slot_of(key, merge_mask_);
  while (merge_keys_[i] != kEmptyKey) i = (i + 1) & merge_mask_;
  merge_keys_[i] = key;
  merge_values_[i] = merge;
}

void BpeModel::encode_word(std::string_view word, BpeScratch& s, std::vector<TokenId>& out) const {
  if (word.size() == 1) {
    out.push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (ignore_merges_) {
    if (const auto it = vocab_.find(word); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  s.ids.clear();
  for (char c : word) s.ids.push_back(byte_ids_[static_cast<unsigned char>(c)]);
  if (word.size() <= kSmallWord) {
    merge_small(s);
    out.insert(out.end(), s.ids.begin(), s.ids.end());
    return;
  }
  merge_large(s);
  for (std::int32_t i = 0; i != -1; i = s.next[static_cast<std::size_t>(i)])
    out.push_back(s.ids[static_cast<std::size_t>(i)]);
}

// ids[] is the live word; ranks[i] the merge rank of (ids[i], ids[i+1]).
void BpeModel::merge_small(BpeScratch& s) const {
  std::vector<TokenId>& ids = s.ids;
  std::vector<std::uint32_t>& ranks = s.ranks;
  ranks.clear();
  for (std::size_t i = 0; i + 1 < ids.size(); ++i)
    ranks.push_back(find_merge(ids[i], ids[i + 1]).rank);
  while (!ranks.empty()) {
    const auto best = std::min_element(ranks.begin(), ranks.end());  // leftmost minimum
    if (*best == kNoMerge) break;
    const auto i = static_cast<std::size_t>(best - ranks.begin());
    ids[i] = find_merge(ids[i], ids[i + 1]).result;
    ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    ranks.erase(ranks.begin() + static_cast<std::ptrdiff_t>(i));
    if (i > 0) ranks[i - 1] = find_merge(ids[i - 1], ids[i]).rank;
    if (i < ranks.size()) ranks[i] = find_merge(ids[i], ids[i + 1]).rank;
  }
}

namespace {

bool later(const BpeScratch::Candidate& a, const BpeScratch::Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

}  // namespace

bool BpeModel::begin_word(std::string_view word, BpeScratch& s, std::vector<TokenId>& out) const {
  if (word.size() == 1) {
    out.push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return true;
  }
  if (ignore_merges_) {
    if (const auto it = vocab_.find(word); it != vocab_.end()) {
      out.push_back(it->second);
      return true;
    }
  }
  s.ids.clear();
  for (char c : word) s.ids.push_back(byte_ids_[static_cast<unsigned char>(c)]);
  start_large(s);
  return false;
}

void BpeModel::finish_word(const BpeScratch& s, std::vector<TokenId>& out) const {
  for (std::int32_t i = 0; i != -1; i = s.next[static_cast<std::size_t>(i)])
    out.push_back(s.ids[static_cast<std::size_t>(i)]);
}

void BpeModel::push_pair(BpeScratch& s, std::int32_t pos) const {
  const std::int32_t nx = s.next[static_cast<std::size_t>(pos)];
  if (nx == -1) return;
  const Merge m =
      find_merge(s.ids[static_cast<std::size_t>(pos)], s.ids[static_cast<std::size_t>(nx)]);
  if (m.rank == kNoMerge) return;
  s.heap.push_back({m.rank, pos});
  std::push_heap(s.heap.begin(), s.heap.end(), later);
}

// Heap of (rank, position) over a doubly linked list of symbols; stale heap
// entries (their pair changed since) are skipped when popped.
void BpeModel::start_large(BpeScratch& s) const {
  const auto n = static_cast<std::int32_t>(s.ids.size());
  s.prev.resize(static_cast<std::size_t>(n));
  s.next.resize(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) {
    s.prev[static_cast<std::size_t>(i)] = i - 1;
    s.next[static_cast<std::size_t>(i)] = i + 1 < n ? i + 1 : -1;
  }
  s.heap.clear();
  s.scanned = 0;
  s.heapified = false;
}

void BpeModel::merge_large(BpeScratch& s) const {
  start_large(s);
  merge_steps(s, SIZE_MAX);
}

// The candidate pairs are looked up a few per step (a step of the merge
// loop costs about as much as four lookups), then heapified in O(n).
bool BpeModel::merge_steps(BpeScratch& s, std::size_t max_steps) const {
  const std::size_t pairs = s.ids.size() - 1;
  while (s.scanned < pairs && max_steps > 0) {
    const std::size_t take = std::min(pairs - s.scanned, max_steps / 4 + 1);
    for (std::size_t i = s.scanned; i < s.scanned + take; ++i) {
      const Merge m = find_merge(s.ids[i], s.ids[i + 1]);
      if (m.rank != kNoMerge) s.heap.push_back({m.rank, static_cast<std::int32_t>(i)});
    }
    s.scanned += take;
    max_steps -= std::min(max_steps, take * 4);
  }
  if (s.scanned < pairs) return false;
  if (!s.heapified) {
    std::make_heap(s.heap.begin(), s.heap.end(), later);
    s.heapified = true;
  }
  for (; max_steps > 0 && !s.heap.empty(); --max_steps) {
    std::pop_heap(s.heap.begin(), s.heap.end(), later);
    const BpeScratch::Candidate top = s.heap.back();
    s.heap.pop_back();
    const auto pos = static_cast<std::size_t>(top.pos);
    if (s.prev[pos] == -2) continue;  // merged into its left neighbour
    const std::int32_t nx = s.next[pos];
    if (nx == -1) continue;
    const Merge m = find_merge(s.ids[pos], s.ids[static_cast<std::size_t>(nx)]);
    if (m.rank != top.rank) continue;  // stale
    s.ids[pos] = m.result;
    const std::int32_t after = s.next[static_cast<std::size_t>(nx)];
    s.next[pos] = after;
    if (after != -1) s.prev[static_cast<std::size_t>(after)] = top.pos;
    s.prev[static_cast<std::size_t>(nx)] = -2;
    if (s.prev[pos] >= 0) push_pair(s, s.prev[pos]);
    push_pair(s, top.pos);
  }
  return s.heap.empty();
}

}  // namespace ic::tokenizer
