// Inputs for the policy fuzz target (fuzz_policy.cc) in the replay driver
// (tests/support/fuzz_replay.hh): well-formed skeletons with fuzzed values
// (even indexes), then soup of the JSON fragments of docs/policy.md (odd).
#include <random>
#include <string>

#include "fuzz_replay.hh"

namespace ic::test::fuzz {

const int kGeneratedInputs = 20000;

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

const char* fragment(std::mt19937& rng) { return kFragments[rng() % std::size(kFragments)]; }

std::string skeleton(std::mt19937& rng) {
  std::string input = "{\"version\":" + std::to_string(static_cast<int>(rng() % 10)) +
                      ",\"policies\":[{\"namespace\":\"a\"";
  const int fields = static_cast<int>(rng() % 6);
  for (int f = 0; f < fields; ++f) {
    input += ",";
    input += fragment(rng);
    input += ":";
    input += fragment(rng);
  }
  input += "}],\"tenants\":[{\"tenantID\":\"t\",\"maxIndexEntries\":";
  input += fragment(rng);
  input += "}]}";
  return input;
}

}  // namespace

std::string generate(std::mt19937& rng, int index) {
  if (index % 2 == 0) return skeleton(rng);
  std::string input;
  const int pieces = static_cast<int>(rng() % 40);
  for (int p = 0; p < pieces; ++p) {
    if (rng() % 8 == 0) {
      input.push_back(static_cast<char>(rng()));
    } else {
      input += fragment(rng);
    }
  }
  return input;
}

}  // namespace ic::test::fuzz
