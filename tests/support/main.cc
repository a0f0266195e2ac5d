// The one doctest main of every unit and integration test executable
// (test_main_dep in tests/support/meson.build).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "test_main.hh"

namespace ic::test {

// The default: nothing missing. A test file overrides it with its own definition.
__attribute__((weak)) std::string skip_reason() { return {}; }

}  // namespace ic::test

int main(int argc, char** argv) {
  if (const std::string why = ic::test::skip_reason(); !why.empty()) {
    std::fprintf(stderr, "SKIP: %s\n", why.c_str());
    return 77;  // meson test's SKIP
  }
  doctest::Context context(argc, argv);
  return context.run();
}
