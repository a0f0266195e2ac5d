// Runs the shard fuzz target without libFuzzer (gcc builds, meson test): every
// file named on the command line, then deterministic random operation strings
// (seeded, so a failure reproduces).
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::mt19937 rng(20261130);
  constexpr int kInputs = 3000;
  for (int i = 0; i < kInputs; ++i) {
    std::string input(64 + rng() % 1500, '\0');
    for (char& c : input) c = static_cast<char>(rng());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
  }
  std::printf("shard fuzz replay: %d generated inputs, no finding\n", kInputs);
  return 0;
}
