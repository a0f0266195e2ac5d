#pragma once
// The one test main (main.cc) runs doctest, unless the executable says a
// prerequisite is missing: then it prints "SKIP: <reason>" and exits 77, which
// meson test reports as SKIP.

#include <string>

namespace ic::test {

// Why this executable cannot run here ("" = it can). main.cc has a default
// that returns ""; a test file that needs something (node, npm packages)
// defines its own.
std::string skip_reason();

}  // namespace ic::test
