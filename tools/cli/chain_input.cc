#include "cli/chain_input.hh"

#include "common/requests.hh"
#include "common/trace.hh"
#include "fingerprint/fingerprint.hh"

namespace ic::tools::cli {

bool chain_from_ids(const std::vector<std::uint64_t>& ids, std::int32_t input_length, Chain* out,
                    std::string* error) {
  const auto n = static_cast<std::int32_t>(ids.size());
  if (input_length > 0) {
    const std::int32_t last = input_length - kMooncakeBlockTokens * (n - 1);
    if (last < 1 || last > kMooncakeBlockTokens) {
      *error = "--input-length " + std::to_string(input_length) + " does not fit " +
               std::to_string(n) + " blocks of 512 tokens";
      return false;
    }
  }
  for (std::int32_t i = 0; i < n; ++i) {
    out->hashes.push_back(block_hash_bytes(ids[static_cast<std::size_t>(i)]));
    out->tokens.push_back(i + 1 == n && input_length > 0
                              ? input_length - kMooncakeBlockTokens * (n - 1)
                              : kMooncakeBlockTokens);
  }
  return true;
}

bool chain_from_hex(const std::vector<std::string>& hex, const std::vector<std::int32_t>& tokens,
                    Chain* out, std::string* error) {
  if (hex.size() != tokens.size()) {
    *error = "--block-hashes has " + std::to_string(hex.size()) + " entries but --block-tokens " +
             std::to_string(tokens.size());
    return false;
  }
  for (std::size_t i = 0; i < hex.size(); ++i) {
    std::string bytes;
    if (!hex_decode(hex[i], &bytes) || bytes.empty()) {
      *error = "block hash #" + std::to_string(i) + " is not hex: " + hex[i];
      return false;
    }
    if (tokens[i] <= 0) {
      *error = "block token count #" + std::to_string(i) + " must be > 0";
      return false;
    }
    out->hashes.push_back(bytes);
    out->tokens.push_back(tokens[i]);
  }
  return true;
}

bool chain_from_token_ids(const std::vector<std::uint32_t>& token_ids, std::int32_t block_size,
                          Chain* out, std::string* error) {
  if (block_size <= 0 || token_ids.size() < static_cast<std::size_t>(block_size)) {
    *error = "--token-ids has " + std::to_string(token_ids.size()) +
             " tokens, fewer than one block of --block-size " + std::to_string(block_size);
    return false;
  }
  for (const std::uint64_t hash : fingerprint::prefix_hashes(token_ids, block_size)) {
    const auto wire = fingerprint::to_wire(hash);
    out->hashes.emplace_back(reinterpret_cast<const char*>(wire.data()), wire.size());
    out->tokens.push_back(block_size);
  }
  return true;
}

}  // namespace ic::tools::cli
