// Runs the gRPC server session fuzz target without libFuzzer (gcc builds, meson
// test): every file named on the command line, then deterministic inputs made
// from real nghttp2-client traffic (calls, streaming, resets, big and
// compressed messages, bad content-types) with seeded mutations: byte flips,
// truncation, duplication and random frames.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "h2_harness.hh"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

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

void run(const std::string& bytes) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    run(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
  }
  std::mt19937 rng(20261130);
  constexpr int kInputs = 3000;
  for (int i = 0; i < kInputs; ++i) {
    std::string flight = client_flight(rng);
    const int mutations = static_cast<int>(rng() % 4);
    for (int m = 0; m < mutations && !flight.empty(); ++m) {
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
    std::string input(2, '\0');
    input[0] = static_cast<char>(rng() % 4 == 0 ? 0 : rng());
    input[1] = static_cast<char>(rng());
    run(input + flight);
  }
  std::printf("%d generated inputs: no crash\n", kInputs);
  return 0;
}
