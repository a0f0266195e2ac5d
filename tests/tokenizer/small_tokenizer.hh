#pragma once
// A small byte-level tokenizer.json for unit tests: bytes 0..255 are ids
// 0..255, each merge (in rank order) creates the next id from 256 on; the
// pre-tokenizer is a Split regex + ByteLevel like Qwen's.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/byte_level.hh"
#include "tokenizer/utf8.hh"

namespace ic::test {

// Raw bytes → byte-level vocabulary string.
inline std::string byte_level(std::string_view raw) {
  std::string out;
  for (char c : raw)
    tokenizer::append_utf8(out, tokenizer::byte_to_code_point(static_cast<unsigned char>(c)));
  return out;
}

inline nlohmann::json small_tokenizer(
    const std::vector<std::pair<std::string, std::string>>& merges) {
  using nlohmann::json;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level(std::string(1, static_cast<char>(b)))] = b;
  json m = json::array();
  std::uint32_t next = 256;
  for (const auto& [l, r] : merges) {
    m.push_back(json::array({byte_level(l), byte_level(r)}));
    if (!vocab.contains(byte_level(l + r))) vocab[byte_level(l + r)] = next++;
  }
  return json{{"normalizer", nullptr},
              {"pre_tokenizer",
               {{"type", "Sequence"},
                {"pretokenizers",
                 {{{"type", "Split"},
                   {"pattern", {{"Regex", R"( ?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"}}},
                   {"behavior", "Isolated"},
                   {"invert", false}},
                  {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
              {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"vocab", vocab}, {"merges", m}}},
              {"added_tokens", json::array()}};
}

}  // namespace ic::test
