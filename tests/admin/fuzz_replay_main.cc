// Runs the fuzz target without libFuzzer (gcc builds, meson test): every file
// named on the command line, then a fixed number of deterministic inputs built
// from HTTP fragments (seeded, so a failure reproduces).
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {
const char* const kFragments[] = {
    "GET ",
    "POST ",
    "PUT ",
    "/metrics",
    "/a",
    "/policy",
    " HTTP/1.1\r\n",
    " HTTP/1.0\r\n",
    " HTTP/2.0\r\n",
    "Host: x\r\n",
    "Content-Length: 5\r\n",
    "Content-Length: 99999\r\n",
    "Content-Length: 2, 3\r\n",
    "Transfer-Encoding: chunked\r\n",
    "Connection: close\r\n",
    "Expect: 100-continue\r\n",
    "\r\n",
    "\n",
    "\r",
    " ",
    ":",
    "hello",
    "\x00",
    "\xff",
    " folded\r\n",
    "X: yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\r\n",
};
}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::mt19937 rng(20261130);
  constexpr int kInputs = 20000;
  for (int i = 0; i < kInputs; ++i) {
    std::string input(1, static_cast<char>(rng()));
    const int pieces = static_cast<int>(rng() % 40);
    for (int p = 0; p < pieces; ++p) {
      if (rng() % 8 == 0) {
        input.push_back(static_cast<char>(rng()));
      } else {
        const auto& frag = kFragments[rng() % std::size(kFragments)];
        input.append(frag, frag[0] == '\0' ? 1 : std::char_traits<char>::length(frag));
      }
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
  }
  std::printf("replayed %d files and %d generated inputs\n", argc - 1, kInputs);
  return 0;
}
