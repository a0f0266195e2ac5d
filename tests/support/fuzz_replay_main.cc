// The one replay driver of the fuzz targets (see fuzz_replay.hh).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "fuzz_replay.hh"

namespace {

void run(const std::string& bytes) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", argv[i]);
      return 1;
    }
    run(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
  }
  std::mt19937 rng(20261130);
  for (int i = 0; i < ic::test::fuzz::kGeneratedInputs; ++i) run(ic::test::fuzz::generate(rng, i));
  std::printf("replayed %d files and %d generated inputs: no finding\n", argc - 1,
              ic::test::fuzz::kGeneratedInputs);
  return 0;
}
