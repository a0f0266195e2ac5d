#pragma once
// The replay driver (fuzz_replay_main.cc) runs a libFuzzer target without
// libFuzzer, in gcc builds and under meson test: every file named on the
// command line, then inputs the target's generator makes from one seeded
// std::mt19937, so a failure reproduces. A clang build links the same target
// with -fsanitize=fuzzer instead (docs/build.md "Fuzzing").

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>

// The fuzz target (libFuzzer's entry point): 0, or a crash on a finding.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace ic::test::fuzz {

// Supplied by each target's generator file (tests/<area>/fuzz_*_inputs.cc).
// How many inputs the replay driver generates.
extern const int kGeneratedInputs;
// The input number `index`, drawn from `rng` (called with index 0, 1, ... in order).
std::string generate(std::mt19937& rng, int index);

}  // namespace ic::test::fuzz
