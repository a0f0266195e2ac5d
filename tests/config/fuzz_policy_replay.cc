// Runs the policy fuzz target without libFuzzer (gcc builds, meson test):
// every file named on the command line, then deterministic inputs assembled
// from JSON fragments of docs/policy.md (seeded, so a failure reproduces).
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {
const char* const kFragments[] = {
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"version\"",
    "7",
    "3",
    "8",
    "-1",
    "1e400",
    "0.1",
    "-2.5",
    "9223372036854775807",
    "18446744073709551616",
    "\"policies\"",
    "\"tenants\"",
    "\"namespace\"",
    "\"team-a\"",
    "\"\"",
    "\"evictionTTL\"",
    "\"minimumPrefixTokens\"",
    "\"minimumMatchedTokens\"",
    "\"routingFloorScore\"",
    "\"lookupTimeoutMs\"",
    "\"affinityRouting\"",
    "\"eviction\"",
    "\"lru\"",
    "\"lfu\"",
    "\"strategy\"",
    "\"enableChainMatching\"",
    "\"requireChain\"",
    "\"enableTenantHot\"",
    "true",
    "false",
    "null",
    "\"tenantID\"",
    "\"maxIndexEntries\"",
    "\"isolationMode\"",
    "\"inferencecache.io/probe\"",
    "\"\\u0000\"",
    "\"\\ud800\"",
    " ",
    "\n",
    "\xff",
    "\"bogus\"",
};
}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  // Well-formed skeletons with fuzzed values first, then fragment soup.
  std::mt19937 rng(20261130);
  constexpr int kInputs = 20000;
  for (int i = 0; i < kInputs; ++i) {
    std::string input;
    if (i % 2 == 0) {
      input = "{\"version\":" + std::to_string(static_cast<int>(rng() % 10)) +
              ",\"policies\":[{\"namespace\":\"a\"";
      const int fields = static_cast<int>(rng() % 6);
      for (int f = 0; f < fields; ++f) {
        input += ",";
        input += kFragments[rng() % std::size(kFragments)];
        input += ":";
        input += kFragments[rng() % std::size(kFragments)];
      }
      input += "}],\"tenants\":[{\"tenantID\":\"t\",\"maxIndexEntries\":";
      input += kFragments[rng() % std::size(kFragments)];
      input += "}]}";
    } else {
      const int pieces = static_cast<int>(rng() % 40);
      for (int p = 0; p < pieces; ++p) {
        if (rng() % 8 == 0) {
          input.push_back(static_cast<char>(rng()));
        } else {
          input += kFragments[rng() % std::size(kFragments)];
        }
      }
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
  }
  std::printf("policy fuzz replay: %d generated inputs, no finding\n", kInputs);
  return 0;
}
