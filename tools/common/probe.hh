// A fast reachability check of a "host:port" before a client waits on it: grpc++ and nghttp2
// retry a refused connection quietly until their deadline, so without this a typo in the port
// or a server that is not running costs the whole connect timeout and ends in a vague message.
#pragma once

#include <string>

namespace ic::tools {

// Resolves `address` ("host:port", "[v6]:port") and opens one TCP connection to it within
// `timeout_ms`, then closes it. Returns "" when something accepted; else a one-line reason
// naming the address at once: "cannot resolve host \"nohost\": Name or service not known",
// "connection refused by 127.0.0.1:9091 (is the server running? is the port right?)",
// "127.0.0.1:9090: no answer within 3000 ms".
std::string probe_tcp(const std::string& address, int timeout_ms);

}  // namespace ic::tools
