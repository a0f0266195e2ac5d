// Inputs for the framing fuzz target (fuzz_framing.cc) in the replay driver
// (tests/support/fuzz_replay.hh): seeded random streams of valid and broken frames.
#include <random>
#include <string>

#include "fuzz_replay.hh"
#include "h2_harness.hh"

namespace ic::test::fuzz {

const int kGeneratedInputs = 20000;

std::string generate(std::mt19937& rng, int) {
  std::string input(2, '\0');
  input[0] = static_cast<char>(rng());
  input[1] = static_cast<char>(rng());
  const int frames = static_cast<int>(rng() % 6);
  for (int f = 0; f < frames; ++f) {
    input += ic::test::frame(std::string(rng() % 300, 'm'), rng() % 10 == 0 ? rng() % 3 : 0);
  }
  if (rng() % 3 == 0 && input.size() > 2) input.resize(2 + rng() % (input.size() - 1));
  if (rng() % 4 == 0) input += std::to_string(rng() % 100000000) + "HMSmun"[rng() % 6];
  return input;
}

}  // namespace ic::test::fuzz
