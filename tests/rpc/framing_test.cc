#include "rpc/framing.hh"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "h2_harness.hh"

namespace {

using ic::rpc::FrameError;
using ic::rpc::MessageReader;

std::span<const std::byte> bytes(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

std::string text(std::span<const std::byte> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// Feeds `pieces` in order, collecting messages; returns the final error.
FrameError feed_all(MessageReader& r, const std::vector<std::string_view>& pieces,
                    std::vector<std::string>& got) {
  FrameError e = FrameError::kNone;
  for (auto p : pieces)
    e = r.feed(bytes(p), [&](std::span<const std::byte> m) { got.push_back(text(m)); });
  return e;
}

std::vector<std::string> sample_messages() {
  std::string big(300, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  return {"", "a", "hello world", big, std::string("\0\x01\x02", 3)};
}

std::string sample_stream() {
  std::string s;
  for (const auto& m : sample_messages()) s += ic::test::frame(m);
  return s;
}

}  // namespace

TEST_CASE("a message stream split at every byte offset yields the same messages") {
  const std::string stream = sample_stream();
  const auto expected = sample_messages();
  for (std::size_t k = 0; k <= stream.size(); ++k) {
    MessageReader r(1024);
    std::vector<std::string> got;
    const std::string_view sv(stream);
    CHECK(feed_all(r, {sv.substr(0, k), sv.substr(k)}, got) == FrameError::kNone);
    REQUIRE(got == expected);
    CHECK_FALSE(r.mid_message());
  }
}

TEST_CASE("every pair of split offsets in a two-message stream") {
  const std::string stream = ic::test::frame("abc") + ic::test::frame("defgh");
  const std::string_view sv(stream);
  for (std::size_t i = 0; i <= sv.size(); ++i) {
    for (std::size_t j = i; j <= sv.size(); ++j) {
      MessageReader r(64);
      std::vector<std::string> got;
      feed_all(r, {sv.substr(0, i), sv.substr(i, j - i), sv.substr(j)}, got);
      REQUIRE(got == std::vector<std::string>{"abc", "defgh"});
    }
  }
}

TEST_CASE("one byte at a time") {
  const std::string stream = sample_stream();
  MessageReader r(1024);
  std::vector<std::string> got;
  for (char c : stream) {
    const std::string one(1, c);
    CHECK(r.feed(bytes(one), [&](std::span<const std::byte> m) { got.push_back(text(m)); }) ==
          FrameError::kNone);
  }
  CHECK(got == sample_messages());
}

TEST_CASE("one huge message in one piece and in 1000-byte pieces") {
  std::string huge(3 * 1024 * 1024 + 17, 'x');
  huge[0] = 'A';
  huge.back() = 'Z';
  const std::string stream = ic::test::frame(huge);
  {
    MessageReader r(4 * 1024 * 1024);
    std::vector<std::string> got;
    CHECK(feed_all(r, {stream}, got) == FrameError::kNone);
    REQUIRE(got.size() == 1);
    CHECK(got[0] == huge);
    CHECK(r.buffer_capacity() ==
          std::string().capacity());  // whole message in one span: handed out in place
  }
  {
    MessageReader r(4 * 1024 * 1024);
    std::vector<std::string> got;
    const std::string_view sv(stream);
    for (std::size_t off = 0; off < sv.size(); off += 1000) {
      feed_all(r, {sv.substr(off, 1000)}, got);
    }
    REQUIRE(got.size() == 1);
    CHECK(got[0] == huge);
  }
}

TEST_CASE("a whole message inside one span is a view into that span") {
  const std::string stream = ic::test::frame("payload");
  MessageReader r(64);
  const std::byte* seen = nullptr;
  r.feed(bytes(stream), [&](std::span<const std::byte> m) { seen = m.data(); });
  CHECK(seen == reinterpret_cast<const std::byte*>(stream.data()) + 5);
}

TEST_CASE("an oversize length is rejected from the prefix alone, before any allocation") {
  MessageReader r(100);
  std::string prefix = ic::test::frame(std::string(101, 'x')).substr(0, 5);
  int messages = 0;
  CHECK(r.feed(bytes(prefix), [&](auto) { ++messages; }) == FrameError::kTooLarge);
  CHECK(r.buffer_capacity() == std::string().capacity());
  CHECK(messages == 0);
  // sticky
  CHECK(r.feed(bytes(ic::test::frame("ok")), [&](auto) { ++messages; }) == FrameError::kTooLarge);
  CHECK(messages == 0);

  MessageReader max_len(100);
  const std::string huge_len("\x00\xff\xff\xff\xff", 5);
  CHECK(max_len.feed(bytes(huge_len), [&](auto) { ++messages; }) == FrameError::kTooLarge);
  CHECK(max_len.buffer_capacity() == std::string().capacity());
}

TEST_CASE("a message exactly at the limit is accepted") {
  MessageReader r(100);
  std::vector<std::string> got;
  CHECK(feed_all(r, {ic::test::frame(std::string(100, 'y'))}, got) == FrameError::kNone);
  REQUIRE(got.size() == 1);
  CHECK(got[0].size() == 100);
}

TEST_CASE("a split message reserves at most 64 KiB before its bytes arrive") {
  MessageReader r(4 * 1024 * 1024);
  const std::string prefix = ic::test::frame(std::string(1024 * 1024, 'q')).substr(0, 6);
  r.feed(bytes(prefix), [](auto) {});
  CHECK(r.mid_message());
  CHECK(r.buffer_capacity() >= 1);
  CHECK(r.buffer_capacity() <= 64 * 1024 + 64);
}

TEST_CASE("compressed flag and invalid flags") {
  std::vector<std::string> got;
  MessageReader compressed(64);
  CHECK(feed_all(compressed, {ic::test::frame("abc", 1)}, got) == FrameError::kCompressed);
  MessageReader bad(64);
  CHECK(feed_all(bad, {ic::test::frame("abc", 2)}, got) == FrameError::kBadFlag);
  MessageReader after_good(64);
  CHECK(feed_all(after_good, {ic::test::frame("ok") + ic::test::frame("abc", 1)}, got) ==
        FrameError::kCompressed);
  CHECK(got == std::vector<std::string>{"ok"});
}

TEST_CASE("mid_message tracks partial prefixes and bodies") {
  MessageReader r(64);
  const std::string f = ic::test::frame("abcd");
  CHECK_FALSE(r.mid_message());
  r.feed(bytes(std::string_view(f).substr(0, 2)), [](auto) {});
  CHECK(r.mid_message());
  r.feed(bytes(std::string_view(f).substr(2, 5)), [](auto) {});
  CHECK(r.mid_message());
  r.feed(bytes(std::string_view(f).substr(7)), [](auto) {});
  CHECK_FALSE(r.mid_message());
}

TEST_CASE("append_frame_header writes flag 0 and the big-endian length") {
  std::string out;
  ic::rpc::append_frame_header(out, 0x01020304);
  CHECK(out == std::string("\x00\x01\x02\x03\x04", 5));
  out.clear();
  ic::rpc::append_frame_header(out, 0);
  CHECK(out == std::string(5, '\0'));
}
