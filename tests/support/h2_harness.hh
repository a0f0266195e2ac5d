#pragma once
// In-memory HTTP/2 test harness: the tests' nghttp2 client session
// (h2_client_session.hh) wired to a server net::Session through a fake
// net::Connection, plus a manual clock for deadlines. Used by the h2, grpc and
// service unit tests.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grpc_frame.hh"
#include "h2_client_session.hh"
#include "net/session.hh"
#include "rpc/timers.hh"

namespace ic::test {

// Records what the server writes and asks of its socket.
class FakeConnection final : public net::Connection {
 public:
  void send(std::span<const std::byte> bytes) override {
    out.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    ++sends;
  }
  std::size_t queued_bytes() const override { return queued; }
  void pause_reading() override { paused = true; }
  void resume_reading() override { paused = false; }
  void request_flush() override { ++flush_requests; }
  void close(bool abort) override {
    closed = true;
    aborted = abort;
  }
  unsigned core() const override { return 0; }
  std::string_view peer() const override { return "127.0.0.1:1"; }

  std::string out;         // bytes sent and not yet taken by the client
  std::size_t queued = 0;  // what queued_bytes() reports
  int sends = 0;
  int flush_requests = 0;
  bool paused = false;
  bool closed = false;
  bool aborted = false;
};

// A manual clock: timers fire only in advance().
class ManualTimers final : public rpc::Timers {
 public:
  std::int64_t now_us() const override { return now; }
  TimerId add_timer(std::int64_t delay_us, runtime::Task task) override {
    const TimerId id = ++next_id;
    pending.emplace(id, std::make_pair(now + delay_us, std::move(task)));
    return id;
  }
  void cancel_timer(TimerId id) override { pending.erase(id); }
  // Moves the clock forward and runs every timer that became due.
  void advance(std::int64_t us) {
    now += us;
    for (;;) {
      auto it = std::find_if(pending.begin(), pending.end(),
                             [&](const auto& p) { return p.second.first <= now; });
      if (it == pending.end()) break;
      runtime::Task t = std::move(it->second.second);
      pending.erase(it);
      t();
    }
  }

  std::int64_t now = 1'000'000;
  TimerId next_id = 0;
  std::map<TimerId, std::pair<std::int64_t, runtime::Task>> pending;
};

// What the unit tests read of a stream's answer (the raw header values).
struct ClientStream : StreamState {
  std::string header(std::string_view name) const { return find(headers, name); }
  std::string trailer(std::string_view name) const { return find(trailers, name); }
  // grpc-status from trailers, or from a trailers-only header block.
  std::string grpc_status() const {
    const std::string t = trailer("grpc-status");
    return t.empty() ? header("grpc-status") : t;
  }
  std::string grpc_message() const {
    const std::string t = trailer("grpc-message");
    return t.empty() ? header("grpc-message") : t;
  }

 private:
  static std::string find(const HeaderList& list, std::string_view name) {
    for (const auto& [n, v] : list)
      if (n == name) return v;
    return {};
  }
};

// An nghttp2 client session driven by hand (h2_client_session.hh).
using H2Client = BasicH2Client<ClientStream>;

// Moves bytes both ways, one flush per turn, until neither side has anything
// more to say.
// Returns false if the server asked to close the connection (on_data false).
inline bool pump(H2Client& client, net::Session& server, FakeConnection& conn,
                 std::size_t chunk = 0) {
  bool open = true;
  for (int round = 0; round < 10000; ++round) {
    const std::string up = client.take_output();
    if (!up.empty() && open) {
      const auto* p = reinterpret_cast<const std::byte*>(up.data());
      if (chunk == 0) {
        open = server.on_data(std::span(p, up.size()));
      } else {
        for (std::size_t off = 0; off < up.size() && open; off += chunk) {
          open = server.on_data(std::span(p + off, std::min(chunk, up.size() - off)));
        }
      }
    }
    const int asked = conn.flush_requests;
    server.flush();
    // A flush that asks for another one left work for the next turn (input
    // held over the session's per-turn budget).
    const bool next_turn = conn.flush_requests > asked;
    std::string down;
    down.swap(conn.out);
    if (!down.empty()) client.receive(down);
    if (up.empty() && down.empty() && !next_turn) break;
  }
  return open;
}

// The tests' oracle gRPC message codec (grpc_frame.hh): frame(message, flags)
// and unframe(body).
using itest::frame;
using itest::unframe;

}  // namespace ic::test
