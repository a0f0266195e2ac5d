#pragma once
// Small string builders for test names and addresses. They append instead of
// writing `"literal" + std::to_string(n)`, whose inlined insert trips GCC 12's
// false -Wrestrict at -O2/-O3 (GCC bug 105651), an error under werror.

#include <string>
#include <string_view>

namespace ic::itest {

// `prefix` followed by the decimal `n` ("replica-" , 3 → "replica-3").
inline std::string numbered(std::string_view prefix, long long n) {
  std::string s(prefix);
  s += std::to_string(n);
  return s;
}

// "127.0.0.1:<port>".
inline std::string loopback(unsigned port) { return numbered("127.0.0.1:", port); }

}  // namespace ic::itest
