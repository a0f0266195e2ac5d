// Reads the kv-events and engine-metrics fixtures from tests/data (copied byte for byte).
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ic::tools::kvevents::test {

inline std::string read_data(const std::string& relative) {
  const std::string path = std::string(IC_TEST_DATA_DIR) + "/" + relative;
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) throw std::runtime_error("cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string fixture(const std::string& name) {
  return read_data("kv-events/" + name + ".msgpack");
}

// The 16 token ids every vLLM fixture stores (a Qwen chat prompt's first block).
inline const std::vector<std::uint32_t> kQwenBlock = {
    151644, 872, 198, 9064, 374, 279, 6722, 315, 5616, 30, 151645, 198, 151644, 77091, 198, 151667};

}  // namespace ic::tools::kvevents::test
