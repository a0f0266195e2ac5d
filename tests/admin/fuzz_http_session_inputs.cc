// Inputs for the HTTP session fuzz target (fuzz_http_session.cc) in the replay
// driver (tests/support/fuzz_replay.hh): HTTP/1.1 fragments and random bytes.
#include <random>
#include <string>
#include <string_view>

#include "fuzz_replay.hh"

namespace ic::test::fuzz {

const int kGeneratedInputs = 20000;

namespace {
// string_view, so that the NUL fragment keeps its one byte.
constexpr std::string_view kFragments[] = {
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
    {"\x00", 1},
    "\xff",
    " folded\r\n",
    "X: yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\r\n",
};
}  // namespace

std::string generate(std::mt19937& rng, int) {
  std::string input(1, static_cast<char>(rng()));
  const int pieces = static_cast<int>(rng() % 40);
  for (int p = 0; p < pieces; ++p) {
    if (rng() % 8 == 0) {
      input.push_back(static_cast<char>(rng()));
    } else {
      input.append(kFragments[rng() % std::size(kFragments)]);
    }
  }
  return input;
}

}  // namespace ic::test::fuzz
