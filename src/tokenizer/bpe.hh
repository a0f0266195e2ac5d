#pragma once
// The BPE model of a byte-level tokenizer.json ("model": {"type": "BPE"}):
// vocabulary, merge ranks and the merge loop over one pre-tokenized word.
// Semantics follow Hugging Face tokenizers' BPE (Word::merge_all): the
// adjacent pair with the lowest merge rank is merged first, the leftmost on a
// tie, until no adjacent pair has a merge. With ignore_merges (Llama 3) a
// word that is itself in the vocabulary is one token.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ic::tokenizer {

using TokenId = std::uint32_t;

// Per-thread scratch of BpeModel::encode_word: reused between words so the
// merge loop never allocates once the buffers reached the longest word.
struct BpeScratch {
  struct Candidate {
    std::uint32_t rank;
    std::int32_t pos;
  };
  std::vector<TokenId> ids;
  std::vector<std::uint32_t> ranks;  // rank of (ids[i], ids[i+1]); kNoMerge if none
  std::vector<std::int32_t> prev, next;
  std::vector<Candidate> heap;
  // merge_steps(): pairs of ids[] looked up into heap so far, and whether
  // the heap is ordered (it is built in steps too, then heapified once).
  std::size_t scanned = 0;
  bool heapified = false;
};

class BpeModel {
 public:
  // `vocab`: (byte-level string, id) pairs of model.vocab; `merges`: the
  // (left, right) byte-level strings of model.merges in rank order. Returns
  // nullptr and sets `error` when a merge names a string missing from the
  // vocabulary or a byte has no single-byte token.
  static std::unique_ptr<BpeModel> build(
      const std::vector<std::pair<std::string, TokenId>>& vocab,
      const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges,
      std::string& error);

  // Appends the tokens of `word` (raw bytes, non-empty) to `out`.
  void encode_word(std::string_view word, BpeScratch& scratch, std::vector<TokenId>& out) const;

  // The same merges as encode_word, in steps, for a long word whose merge
  // must not run in one piece (tokenizer/encoding.hh): begin_word() appends
  // the tokens to `out` and returns true when no merge loop is needed (one
  // byte, or ignore_merges and the word is in the vocabulary), else fills
  // `scratch`; then merge_steps() runs at most `max_steps` heap steps and
  // returns true once no pair is left to merge, and finish_word() appends the
  // tokens. `scratch` holds about 20 bytes per byte of the word meanwhile.
  bool begin_word(std::string_view word, BpeScratch& scratch, std::vector<TokenId>& out) const;
  bool merge_steps(BpeScratch& scratch, std::size_t max_steps) const;
  void finish_word(const BpeScratch& scratch, std::vector<TokenId>& out) const;

  // Vocabulary entries that decode to bytes, and distinct merges.
  std::size_t vocab_size() const { return vocab_.size(); }
  std::size_t merge_count() const { return merge_count_; }

 private:
  static constexpr std::uint32_t kNoMerge = UINT32_MAX;
  struct Merge {
    std::uint32_t rank = kNoMerge;
    TokenId result = 0;
  };
  // Open-addressing table (left << 32 | right) → Merge; read-only after build.
  Merge find_merge(TokenId left, TokenId right) const;
  void insert_merge(TokenId left, TokenId right, Merge merge);
  void merge_small(BpeScratch& s) const;
  void merge_large(BpeScratch& s) const;
  void start_large(BpeScratch& s) const;
  void push_pair(BpeScratch& s, std::int32_t pos) const;

  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  std::unordered_map<std::string, TokenId, Hash, std::equal_to<>> vocab_;  // raw bytes → id
  TokenId byte_ids_[256] = {};
  std::vector<std::uint64_t> merge_keys_;
  std::vector<Merge> merge_values_;
  std::uint64_t merge_mask_ = 0;
  std::size_t merge_count_ = 0;
  bool ignore_merges_ = false;
};

}  // namespace ic::tokenizer
