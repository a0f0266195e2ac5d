// gRPC length-prefixed framing used by the bench's nghttp2 client.
#include <doctest/doctest.h>

#include "common/grpc_frame.hh"
#include "inferencecache/v1alpha1/inferencecache.pb.h"

using namespace ic::tools;

TEST_CASE("a frame is flag 0, big-endian length, message") {
  inferencecache::v1alpha1::Ack ack;
  ack.set_accepted(true);
  std::string out;
  append_grpc_frame(ack, &out);
  CHECK(out == std::string("\x00\x00\x00\x00\x02\x08\x01", 7));
  inferencecache::v1alpha1::Ack empty;
  append_grpc_frame(empty, &out);
  CHECK(out.size() == 12);
  CHECK(out.substr(7) == std::string(5, '\0'));
}

TEST_CASE("the decoder reassembles messages split across chunks") {
  GrpcFrameDecoder decoder;
  const std::string wire("\x00\x00\x00\x00\x02\x08\x01\x00\x00\x00\x00\x00", 12);
  std::string message;
  for (char c : wire) {
    REQUIRE(decoder.feed(std::string_view(&c, 1)));
  }
  REQUIRE(decoder.next(&message));
  CHECK(message == "\x08\x01");
  REQUIRE(decoder.next(&message));
  CHECK(message.empty());
  CHECK_FALSE(decoder.next(&message));
  CHECK(decoder.messages() == 2);
}

TEST_CASE("compressed or oversized frames are refused before buffering") {
  GrpcFrameDecoder small(4);
  CHECK_FALSE(small.feed(std::string_view("\x00\x00\x00\x00\x05", 5)));
  GrpcFrameDecoder decoder;
  CHECK_FALSE(decoder.feed(std::string_view("\x01\x00\x00\x00\x01x", 6)));
  std::string message;
  CHECK_FALSE(decoder.next(&message));
}
