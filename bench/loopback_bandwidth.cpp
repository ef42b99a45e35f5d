// Raw loopback TCP throughput (see loopback_bandwidth.h).
#include "loopback_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>
#include <vector>

#include "transport/stream.h"

namespace weft::rpc {

namespace {

constexpr size_t kWriteBytes = size_t{16} << 20;

}  // namespace

double measure_loopback_tcp_bandwidth(size_t bytes) {
  using Clock = std::chrono::steady_clock;
  if (bytes == 0) return 0;
  const std::unique_ptr<Listener> listener = tcp_listen("127.0.0.1", 0);
  std::exception_ptr receive_error;
  Clock::time_point received_all;
  std::thread receiver([&] {
    try {
      std::vector<char> buffer(std::min(bytes, kWriteBytes));
      const std::unique_ptr<Stream> in = listener->accept();
      if (!in) return;  // the sender failed and closed the listener
      for (size_t left = bytes; left > 0;) {
        const size_t n = std::min(left, buffer.size());
        in->read_exact(buffer.data(), n);
        left -= n;
      }
      received_all = Clock::now();
    } catch (...) {
      receive_error = std::current_exception();
    }
  });

  std::exception_ptr send_error;
  Clock::time_point start;
  try {
    const std::unique_ptr<Stream> out = tcp_connect("127.0.0.1", listener->port());
    // Touch the pages first so the timing sees the network, not page faults.
    const std::vector<char> buffer(std::min(bytes, kWriteBytes), 'w');
    start = Clock::now();
    for (size_t left = bytes; left > 0;) {
      const size_t n = std::min(left, buffer.size());
      out->write_all(buffer.data(), n);
      left -= n;
    }
  } catch (...) {
    send_error = std::current_exception();
    listener->close();  // the receiver may still be waiting in accept()
  }
  receiver.join();
  if (send_error) std::rethrow_exception(send_error);
  if (receive_error) std::rethrow_exception(receive_error);
  const double seconds = std::chrono::duration<double>(received_all - start).count();
  return static_cast<double>(bytes) / std::max(seconds, 1e-9);
}

}  // namespace weft::rpc
