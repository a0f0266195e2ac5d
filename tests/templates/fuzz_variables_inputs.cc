// Inputs for the variables fuzz target (fuzz_variables.cc) in the replay
// driver (tests/support/fuzz_replay.hh): five NUL-separated values drawn from
// fragments of every type, valid and not, sometimes fewer or more of them.
#include <random>
#include <string>

#include "fuzz_replay.hh"

namespace ic::test::fuzz {

const int kGeneratedInputs = 5000;

namespace {
const char* const kFragments[] = {
    "",
    "0",
    "-1",
    "9223372036854775807",
    "9223372036854775808",
    "1.5",
    "1e308",
    "1e400",
    "nan",
    "inf",
    "true",
    "false",
    "True",
    "null",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"a\"",
    "{\"k\":[1,2,{\"x\":null}]}",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]"
    "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
    "\"\\ud800\"",
    "\xff",
    "\n",
    " ",
    "{{ x }}",
    "{% if %}",
    "\xe2\x82\xac",
    "0x10",
    "+5"};

// Values of each variable's type (s, i, n, b, j), so most inputs render.
const char* const kValid[5][4] = {{"", "hello\nworld", "{{ s }}", "\xe2\x82\xac"},
                                  {"0", "-7", "9223372036854775806", "42"},
                                  {"0.5", "-1e3", "3", "1e-300"},
                                  {"true", "false", "true", "false"},
                                  {"{\"a\":1,\"b\":[true,null]}", "[1,\"x\"]", "\"s\"", "{}"}};
}  // namespace

std::string generate(std::mt19937& rng, int /*index*/) {
  std::string out;
  const int values = 4 + static_cast<int>(rng() % 2);  // 4..5: a missing one too
  for (int v = 0; v < values; ++v) {
    if (v > 0) out.push_back('\0');
    if (rng() % 4 != 0) {  // mostly a valid value: the render runs
      out += kValid[v][rng() % 4];
      continue;
    }
    const int pieces = static_cast<int>(rng() % 4);
    for (int p = 0; p < pieces; ++p) {
      out += kFragments[rng() % (sizeof kFragments / sizeof *kFragments)];
    }
  }
  return out;
}

}  // namespace ic::test::fuzz
