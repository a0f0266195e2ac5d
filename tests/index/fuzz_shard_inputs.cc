// Inputs for the shard fuzz target (fuzz_shard.cc) in the replay driver
// (tests/support/fuzz_replay.hh): random operation strings of 64 to 1563 bytes.
#include <random>
#include <string>

#include "fuzz_replay.hh"

namespace ic::test::fuzz {

const int kGeneratedInputs = 3000;

std::string generate(std::mt19937& rng, int) {
  std::string input(64 + rng() % 1500, '\0');
  for (char& c : input) c = static_cast<char>(rng());
  return input;
}

}  // namespace ic::test::fuzz
