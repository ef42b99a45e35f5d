// A plain-socket HTTP/1.1 client for the server tests: requests written
// byte for byte (so tests can also send what no library would), answers
// read until the server closes (Connection: close).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace serve_test {

// A connected socket to 127.0.0.1:port; closed on destruction.
class Socket {
 public:
  explicit Socket(int port, int timeout_s = 30) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) throw std::runtime_error("socket");
    timeval tv{timeout_s, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      throw std::runtime_error("connect to port " + std::to_string(port));
    }
  }
  ~Socket() { close(); }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  bool send(const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }
  // Up to max bytes; "" at the end of the stream or on a timeout.
  std::string read_some(size_t max = 65536) {
    std::string buf(max, '\0');
    const ssize_t n = ::recv(fd_, buf.data(), max, 0);
    buf.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return buf;
  }
  std::string read_all() {
    std::string all, part;
    while (!(part = read_some()).empty()) all += part;
    return all;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

struct Response {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;  // as sent (chunked bodies left chunked)
};

inline Response parse_response(const std::string& raw) {
  Response r;
  const size_t end = raw.find("\r\n\r\n");
  r.head = raw.substr(0, end);
  r.body = end == std::string::npos ? "" : raw.substr(end + 4);
  if (raw.size() > 12 && raw.compare(0, 5, "HTTP/") == 0) r.status = std::stoi(raw.substr(9, 3));
  return r;
}

// One request with Connection: close; the whole answer.
inline Response request(int port, const std::string& method, const std::string& path, const std::string& body = "",
                        const std::string& extra_headers = "") {
  Socket s(port);
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + extra_headers;
  if (!body.empty() || method == "POST")
    req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  s.send(req);
  return parse_response(s.read_all());
}

}  // namespace serve_test
