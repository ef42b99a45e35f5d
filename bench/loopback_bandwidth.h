// The machine limit the RPC benchmark reports its upload speed against:
// raw TCP throughput over the loopback interface, measured in the same run.
#pragma once

#include <cstddef>

namespace weft::rpc {

// Sends `bytes` from one thread to another over a loopback connection
// (listener on 127.0.0.1:0, the same socket options as tcp_connect) in big
// writes; returns bytes per second, from the first write until the receiver
// has the last byte. Throws Error(disconnected) if the connection fails.
double measure_loopback_tcp_bandwidth(size_t bytes);

}  // namespace weft::rpc
