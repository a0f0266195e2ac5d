#pragma once
// Invariant checks. IC_CHECK stays on in release builds: for cheap
// invariants whose violation means the process can no longer be trusted
// (a misuse of an internal API, a library call that cannot fail when used
// right). IC_DCHECK is for costly ones and compiles to nothing under NDEBUG.
// Never for bad input from a peer: that gets a clear error, not an abort
// (docs/architecture.md "Invariants").
//
//   IC_CHECK(rc == 0, "nghttp2_session_server_new");

#include <string_view>

namespace ic::base {

// Writes one error line ("invariant violated", with the condition, `what`,
// file and line) straight to stderr and aborts (SIGABRT, so a core dump shows
// the stack).
[[noreturn]] void check_failed(std::string_view condition, std::string_view what,
                               std::string_view file, int line);

}  // namespace ic::base

#define IC_CHECK(cond, what)                                       \
  do {                                                             \
    if (!(cond)) [[unlikely]] {                                    \
      ::ic::base::check_failed(#cond, (what), __FILE__, __LINE__); \
    }                                                              \
  } while (false)

#ifdef NDEBUG
// Not evaluated; sizeof keeps the operands "used" for the compiler's warnings.
#define IC_DCHECK(cond, what)                  \
  do {                                         \
    static_cast<void>(sizeof((cond) ? 1 : 0)); \
    static_cast<void>(sizeof(what));           \
  } while (false)
#else
#define IC_DCHECK(cond, what) IC_CHECK(cond, what)
#endif
