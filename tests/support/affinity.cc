#include "affinity.hh"

#include <openssl/evp.h>

#include "builders.hh"

namespace ic::test {

std::string affinity_pick(const std::string& seed, const std::vector<std::string>& sorted) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(seed.data(), seed.size(), d, &n, EVP_sha256(), nullptr);
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | d[i];
  return sorted[v % sorted.size()];
}

std::string chain_seed(const std::vector<std::uint64_t>& blocks) {
  std::string s;
  for (std::uint64_t b : blocks) s += std::string("\0\0\0\x08", 4) + block_hash(b);
  return s;
}

}  // namespace ic::test
