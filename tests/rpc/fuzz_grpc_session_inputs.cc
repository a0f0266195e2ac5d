// Inputs for the GrpcSession fuzz target (fuzz_grpc_session.cc) in the replay
// driver (tests/support/fuzz_replay.hh): real nghttp2-client traffic (calls,
// streaming, resets, big and compressed messages, bad content-types) with
// seeded mutations: byte flips, truncation, duplication and random frames.
#include <random>
#include <string>
#include <vector>

#include "fuzz_replay.hh"
#include "h2_harness.hh"

namespace ic::test::fuzz {

const int kGeneratedInputs = 3000;

namespace {

// One client flight (without the 24-byte preface) exercising most paths.
std::string client_flight(std::mt19937& rng) {
  ic::test::H2Client c;
  const int calls = 1 + static_cast<int>(rng() % 6);
  for (int i = 0; i < calls; ++i) {
    const std::string msg(rng() % 64, 'x');
    std::string body = ic::test::frame(std::string("\x0a", 1) + static_cast<char>(msg.size()) + msg,
                                       rng() % 8 == 0 ? 1 : 0);
    if (rng() % 10 == 0) body = ic::test::frame(std::string(5000, 'y'));
    const char* path = rng() % 2 ? "/f.S/Unary" : (rng() % 2 ? "/f.S/Bidi" : "/nope.S/X");
    std::vector<std::pair<std::string, std::string>> extra;
    if (rng() % 4 == 0) extra.push_back({"grpc-timeout", std::to_string(rng() % 2000) + "m"});
    const bool end = rng() % 3 != 0;
    const auto id = c.grpc_call(
        path, body.substr(0, rng() % 3 == 0 ? rng() % (body.size() + 1) : body.size()), end, extra);
    if (!end && rng() % 2 == 0) c.cancel(id);
  }
  std::string out = c.take_output();
  return out.substr(24);  // the target adds the preface itself
}

// One of the four mutations, applied to a non-empty flight.
void mutate(std::mt19937& rng, std::string& flight) {
  switch (rng() % 4) {
    case 0:
      flight[rng() % flight.size()] = static_cast<char>(rng());
      break;
    case 1:
      flight.resize(rng() % flight.size());
      break;
    case 2:
      flight += flight.substr(rng() % flight.size());
      break;
    default: {
      std::string frame(9 + rng() % 16, '\0');
      for (auto& ch : frame) ch = static_cast<char>(rng());
      flight.insert(rng() % (flight.size() + 1), frame);
    }
  }
}

}  // namespace

std::string generate(std::mt19937& rng, int) {
  std::string flight = client_flight(rng);
  const int mutations = static_cast<int>(rng() % 4);
  for (int m = 0; m < mutations && !flight.empty(); ++m) mutate(rng, flight);
  std::string input(2, '\0');
  input[0] = static_cast<char>(rng() % 4 == 0 ? 0 : rng());
  input[1] = static_cast<char>(rng());
  return input + flight;
}

}  // namespace ic::test::fuzz
