// Runs the framing fuzz target without libFuzzer: files named on the command
// line, then seeded random streams of valid and broken frames.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "h2_harness.hh"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  const auto run = [](const std::string& s) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
  };
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    run(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
  }
  std::mt19937 rng(20261130);
  constexpr int kInputs = 20000;
  for (int i = 0; i < kInputs; ++i) {
    std::string input(2, '\0');
    input[0] = static_cast<char>(rng());
    input[1] = static_cast<char>(rng());
    const int frames = static_cast<int>(rng() % 6);
    for (int f = 0; f < frames; ++f) {
      input += ic::test::frame(std::string(rng() % 300, 'm'), rng() % 10 == 0 ? rng() % 3 : 0);
    }
    if (rng() % 3 == 0 && input.size() > 2) input.resize(2 + rng() % (input.size() - 1));
    if (rng() % 4 == 0) input += std::to_string(rng() % 100000000) + "HMSmun"[rng() % 6];
    run(input);
  }
  std::printf("%d generated inputs: no mismatch\n", kInputs);
  return 0;
}
