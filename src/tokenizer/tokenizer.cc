#include "tokenizer/tokenizer.hh"

#include <xxhash.h>

#include <atomic>

#include <nlohmann/json.hpp>

#include "tokenizer/encoding.hh"

namespace ic::tokenizer {
namespace {

using nlohmann::json;

// GPT-2's pattern, which ByteLevel(use_regex = true) applies.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

bool is_null_or_empty(const json& j, std::string_view key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() || (it->is_string() && it->get<std::string>().empty());
}

bool flag(const json& j, std::string_view key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

// normalizer: null | NFC | Sequence of NFC. Sets `nfc`.
bool parse_normalizer(const json& n, bool& nfc, std::string& error) {
  if (n.is_null()) return true;
  const std::string type = n.value("type", "");
  if (type == "NFC") {
    nfc = true;
    return true;
  }
  if (type == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
    for (const json& step : n["normalizers"]) {
      if (!parse_normalizer(step, nfc, error)) return false;
    }
    return true;
  }
  error = "normalizer \"" + type + "\" is not supported (only NFC)";
  return false;
}

bool byte_level_ok(const json& p, bool want_regex, std::string& error) {
  if (flag(p, "add_prefix_space")) {
    error = "ByteLevel add_prefix_space is not supported";
    return false;
  }
  const bool use_regex = p.value("use_regex", true);
  if (use_regex != want_regex) {
    error = want_regex ? "ByteLevel without a Split needs use_regex"
                       : "ByteLevel after Split must have use_regex false";
    return false;
  }
  return true;
}

// pre_tokenizer → the split pattern.
bool parse_pre_tokenizer(const json& p, std::string& pattern, std::string& error) {
  const std::string type = p.is_object() ? p.value("type", "") : "";
  if (type == "ByteLevel") {
    pattern = kGpt2Pattern;
    return byte_level_ok(p, true, error);
  }
  if (type != "Sequence" || !p.contains("pretokenizers") || p["pretokenizers"].size() != 2) {
    error = "pre_tokenizer must be ByteLevel or Sequence[Split, ByteLevel]";
    return false;
  }
  const json& split = p["pretokenizers"][0];
  if (split.value("type", "") != "Split" || split.value("behavior", "") != "Isolated" ||
      flag(split, "invert") || !split.contains("pattern") || !split["pattern"].contains("Regex")) {
    error = "pre_tokenizer Split must be a Regex pattern, behavior Isolated, not inverted";
    return false;
  }
  pattern = split["pattern"]["Regex"].get<std::string>();
  const json& byte_level = p["pretokenizers"][1];
  if (byte_level.value("type", "") != "ByteLevel") {
    error = "pre_tokenizer Sequence must end with ByteLevel";
    return false;
  }
  return byte_level_ok(byte_level, false, error);
}

bool parse_model(const json& m, std::vector<std::pair<std::string, TokenId>>& vocab,
                 std::vector<std::pair<std::string, std::string>>& merges, std::string& error) {
  if (m.value("type", "BPE") != "BPE" || !m.contains("vocab") || !m.contains("merges")) {
    error = "model must be BPE with vocab and merges";
    return false;
  }
  if (flag(m, "byte_fallback") || !(m.contains("dropout") ? m["dropout"].is_null() : true) ||
      !is_null_or_empty(m, "continuing_subword_prefix") ||
      !is_null_or_empty(m, "end_of_word_suffix")) {
    error = "model BPE with byte_fallback, dropout or subword affixes is not supported";
    return false;
  }
  for (const auto& [text, id] : m["vocab"].items()) vocab.emplace_back(text, id.get<TokenId>());
  for (const json& merge : m["merges"]) {
    if (merge.is_array() && merge.size() == 2) {
      merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
      continue;
    }
    const std::string text = merge.get<std::string>();
    const std::size_t space = text.find(' ');
    if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
      error = "merge \"" + text + "\" is not two space-separated tokens";
      return false;
    }
    merges.emplace_back(text.substr(0, space), text.substr(space + 1));
  }
  return true;
}

bool parse_added(const json& added, std::vector<std::pair<std::string, TokenId>>& out,
                 std::string& error) {
  if (added.is_null()) return true;
  for (const json& t : added) {
    const std::string content = t.value("content", "");
    if (content.empty() || flag(t, "lstrip") || flag(t, "rstrip") || flag(t, "single_word")) {
      error = "added token \"" + content + "\": empty, lstrip, rstrip or single_word unsupported";
      return false;
    }
    out.emplace_back(content, t.at("id").get<TokenId>());
  }
  return true;
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(std::string_view tokenizer_json, std::string& error) {
  static std::atomic<std::uint64_t> loaded{0};
  auto tok = std::unique_ptr<Tokenizer>(new Tokenizer());
  tok->serial_ = ++loaded;
  try {
    const json root = json::parse(tokenizer_json);
    std::string pattern;
    std::vector<std::pair<std::string, TokenId>> vocab;
    std::vector<std::pair<std::string, std::string>> merges;
    if (!parse_normalizer(root.value("normalizer", json()), tok->nfc_, error) ||
        !parse_pre_tokenizer(root.value("pre_tokenizer", json()), pattern, error) ||
        !parse_model(root.at("model"), vocab, merges, error) ||
        !parse_added(root.value("added_tokens", json()), tok->added_list_, error))
      return nullptr;
    const bool ignore_merges = flag(root["model"], "ignore_merges");
    tok->bpe_ = BpeModel::build(vocab, merges, ignore_merges, error);
    if (!tok->bpe_) return nullptr;
    tok->split_ = SplitRegex::compile(pattern, error);
    if (!tok->split_) return nullptr;
  } catch (const json::exception& e) {
    error = std::string("tokenizer.json: ") + e.what();
    return nullptr;
  }
  for (const auto& [content, id] : tok->added_list_) tok->added_.add(content, id);
  return tok;
}

Tokenizer::~Tokenizer() = default;

std::int64_t Tokenizer::added_token_id(std::string_view content) const {
  for (const auto& [text, id] : added_list_) {
    if (text == content) return id;
  }
  return -1;
}

Workspace::Workspace() : cache_(kWordCacheSlots) {}

EncodeStatus Tokenizer::encode(std::string_view text, Workspace& ws, std::vector<TokenId>& out,
                               const std::function<bool()>& expired) const {
  Encoding encoding(*this, text, out);
  const EncodeStatus status = encoding.step(ws, expired);
  return status == EncodeStatus::kPaused ? EncodeStatus::kDeadline : status;
}

void Tokenizer::encode_word(std::string_view word, Workspace& ws, std::vector<TokenId>& out) const {
  if (word.size() > Workspace::kMaxCachedWordBytes) {
    bpe_->encode_word(word, ws.bpe_, out);
    return;
  }
  const std::size_t slot = XXH3_64bits(word.data(), word.size()) % Workspace::kWordCacheSlots;
  Workspace::CachedWord& c = ws.cache_[slot];
  if (c.owner == serial_ && c.word == word) {
    out.insert(out.end(), c.ids.begin(), c.ids.end());
    return;
  }
  const std::size_t first = out.size();
  bpe_->encode_word(word, ws.bpe_, out);
  c.owner = serial_;
  c.word.assign(word);
  c.ids.assign(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
}

}  // namespace ic::tokenizer
