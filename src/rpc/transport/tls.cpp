// TLS streams (tls.h). One SSL object per connection, driven over the TCP
// stream's non-blocking socket. A Stream has one reader and one writer that
// may run at once; OpenSSL allows one caller per SSL object at a time, so
// every SSL call holds ssl_mu_, and neither side holds it while it waits
// for the socket (poll), so a blocked read never stalls a write.
#include "transport/tls.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "transport/tcp_impl.h"
#include "weft/core/error.h"

namespace weft::rpc {
namespace {

using Clock = std::chrono::steady_clock;
using Deadline = Stream::Deadline;

constexpr int kWriteBuffer = 256 << 10;  // records gathered before a send

// OpenSSL's queued errors as one line (and the queue emptied).
std::string ssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(e, text, sizeof text);
    out += (out.empty() ? "" : "; ") + std::string(text);
  }
  return out.empty() ? "no detail" : out;
}

int remaining_ms(Deadline deadline) {
  if (deadline == Deadline::max()) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

// Waits for events on fd until deadline: false when it passed first. An
// error or hang-up counts as ready (the next call reports it).
bool wait_fd(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int ready = ::poll(&p, 1, remaining_ms(deadline));
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) return true;
  }
}

std::string hex_fingerprint(X509* cert) {
  const int n = i2d_X509(cert, nullptr);
  if (n <= 0) return "";
  std::vector<unsigned char> der(static_cast<size_t>(n));
  unsigned char* p = der.data();
  i2d_X509(cert, &p);
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(der.data(), der.size(), md);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "sha256:";
  for (unsigned char b : md) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

SSL_CTX* new_context(bool server) {
  SSL_CTX* ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  if (ctx == nullptr) fail(ErrorKind::internal, "tls", "cannot make a TLS context: " + ssl_errors());
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  // AES-128-GCM first: as safe here, and the fastest with AES-NI.
  SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
  // Frames carry their own lengths: a cut stream fails reading a frame, so
  // a missing close_notify is only an end of stream.
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Read ahead into a large buffer: many records per recv, not two recvs
  // (head, then body) per 16 KiB record.
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_default_read_buffer_len(ctx, size_t{256} << 10);
  // No session tickets: nothing for the server to write after the handshake.
  if (server) SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);  // the host pins the fingerprint itself
  return ctx;
}

SSL_CTX* client_context() {
  static SSL_CTX* ctx = new_context(false);  // one for the process, never freed
  return ctx;
}

detail::TcpStream& tcp_of(Stream& s) {
  auto* tcp = dynamic_cast<detail::TcpStream*>(&s);
  if (tcp == nullptr) fail(ErrorKind::internal, "tls", "TLS runs over a TCP stream only");
  return *tcp;
}

class TlsStream final : public Stream {
 public:
  // owned: tcp itself, or null when the caller keeps tcp alive longer.
  TlsStream(Stream& tcp, std::unique_ptr<Stream> owned, SSL* ssl)
      : owned_(std::move(owned)), tcp_(tcp_of(tcp)), ssl_(ssl), fd_(tcp_.fd()), read_timeout_(tcp_.read_timeout()) {}
  ~TlsStream() override { SSL_free(ssl_); }
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  void write_all(const void* a, size_t na, const void* b, size_t nb) override {
    // A small head goes out in one record with the start of the body: one
    // record (and one send) per frame, as a gather write is for TCP.
    const auto* pa = static_cast<const uint8_t*>(a);
    const auto* pb = static_cast<const uint8_t*>(b);
    if (na > 0 && na < kJoinBytes && nb > 0) {
      uint8_t joined[kJoinBytes];
      const size_t take = std::min(nb, kJoinBytes - na);
      std::memcpy(joined, pa, na);
      std::memcpy(joined + na, pb, take);
      write_bytes(joined, na + take, na + nb);
      write_bytes(pb + take, nb - take, na + nb);
    } else {
      write_bytes(pa, na, na + nb);
      write_bytes(pb, nb, na + nb);
    }
    flush(write_deadline_, na + nb);
  }

  void read_exact(void* data, size_t n) override {
    auto* out = static_cast<uint8_t*>(data);
    size_t left = n;
    while (left > 0) {
      size_t got = 0;
      int error = SSL_ERROR_NONE;
      std::string detail;
      {
        std::lock_guard lock(ssl_mu_);
        ERR_clear_error();
        if (SSL_read_ex(ssl_, out, left, &got) != 1) {
          error = SSL_get_error(ssl_, 0);
          if (error == SSL_ERROR_SSL) detail = ssl_errors();
        }
      }
      if (error == SSL_ERROR_NONE) {
        out += got;
        left -= got;
        continue;
      }
      // Reading may have queued a reply of the protocol's own (a key update).
      flush(read_deadline_, 0);
      if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
        const auto idle = read_timeout_.count() > 0 ? Clock::now() + read_timeout_ : Deadline::max();
        const Deadline deadline = std::min(idle, read_deadline_);
        if (!wait_fd(fd_, error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline)) {
          if (read_deadline_ <= idle) {
            fail(ErrorKind::disconnected, "rpc",
                 peer() + ": timed out: " + std::to_string(n - left) + " of " + std::to_string(n) +
                     " bytes arrived before the deadline");
          }
          fail(ErrorKind::disconnected, "rpc",
               peer() + ": no data for " + std::to_string(read_timeout_.count()) + " ms while reading " +
                   std::to_string(n) + " bytes");
        }
        continue;
      }
      if (error == SSL_ERROR_SSL) {
        fail(ErrorKind::disconnected, "rpc", peer() + ": TLS error while reading " + std::to_string(n) + " bytes: " + detail);
      }
      fail(ErrorKind::disconnected, "rpc", peer() + ": connection closed while reading " + std::to_string(n) + " bytes");
    }
  }

  void shutdown() override { tcp_.shutdown(); }
  std::string peer() const override { return tcp_.peer(); }
  void set_read_deadline(Deadline deadline) override { read_deadline_ = deadline; }
  void set_write_deadline(Deadline deadline) override { write_deadline_ = deadline; }
  void set_write_stall_bound(std::chrono::milliseconds bound) override { write_stall_bound_ = bound; }
  bool peer_closed() override { return tcp_.peer_closed(); }

 private:
  static constexpr size_t kJoinBytes = 16384;  // a TLS record's most plaintext

  // Sends what the write buffer holds; total: the write's size, for messages.
  void flush(Deadline deadline, size_t total) {
    for (;;) {
      int done = 0;
      {
        std::lock_guard lock(ssl_mu_);
        BIO* out = SSL_get_wbio(ssl_);
        if (BIO_wpending(out) == 0) return;
        done = BIO_flush(out);
        if (done <= 0 && !BIO_should_retry(out)) done = -1;
      }
      if (done > 0) return;
      if (done < 0) {
        fail(ErrorKind::disconnected, "rpc", peer() + ": connection closed while writing " + std::to_string(total) + " bytes");
      }
      wait_for_room_or_fail(deadline, total);
    }
  }

  // Room to write on the socket by deadline, within the stall bound.
  void wait_for_room_or_fail(Deadline deadline, size_t total) {
    const detail::RoomWait w = detail::wait_for_room(fd_, deadline, write_stall_bound_);
    if (w == detail::RoomWait::stalled) detail::fail_stalled_write(peer(), total, write_stall_bound_);
    if (w == detail::RoomWait::deadline)
      fail(ErrorKind::disconnected, "rpc",
           peer() + ": write of " + std::to_string(total) + " bytes timed out (the peer is not reading)");
  }

  // Writes n bytes of a write of total bytes (for messages).
  void write_bytes(const uint8_t* p, size_t n, size_t total) {
    while (n > 0) {
      size_t written = 0;
      int error = SSL_ERROR_NONE;
      std::string detail;
      {
        std::lock_guard lock(ssl_mu_);
        ERR_clear_error();
        if (SSL_write_ex(ssl_, p, n, &written) != 1) {
          error = SSL_get_error(ssl_, 0);
          if (error == SSL_ERROR_SSL) detail = ssl_errors();
        }
      }
      if (error == SSL_ERROR_NONE) {
        p += written;
        n -= written;
        continue;
      }
      if (error == SSL_ERROR_WANT_WRITE) {
        wait_for_room_or_fail(write_deadline_, total);
        continue;
      }
      if (error == SSL_ERROR_WANT_READ) {
        if (!wait_fd(fd_, POLLIN, write_deadline_)) {
          fail(ErrorKind::disconnected, "rpc",
               peer() + ": write of " + std::to_string(total) + " bytes timed out (the peer is not reading)");
        }
        continue;
      }
      fail(ErrorKind::disconnected, "rpc",
           peer() + ": connection closed while writing " + std::to_string(total) + " bytes" +
               (detail.empty() ? "" : " (TLS: " + detail + ")"));
    }
  }

  std::unique_ptr<Stream> owned_;
  detail::TcpStream& tcp_;
  SSL* ssl_;
  const int fd_;
  const std::chrono::milliseconds read_timeout_;
  std::mutex ssl_mu_;
  Deadline read_deadline_ = Deadline::max();
  Deadline write_deadline_ = Deadline::max();
  std::chrono::milliseconds write_stall_bound_{0};  // set_write_stall_bound
};

// Runs the handshake on tcp's socket (made non-blocking); returns the SSL
// object, or throws naming the peer and OpenSSL's reason.
SSL* handshake(detail::TcpStream& tcp, SSL_CTX* ctx, bool server, Deadline deadline) {
  const int fd = tcp.fd();
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  SSL* ssl = SSL_new(ctx);
  // Records are written through a buffer (flushed at the end of each
  // write_all): one send per kWriteBuffer of records, not one per 16 KiB record.
  BIO* in = BIO_new_socket(fd, BIO_NOCLOSE);
  BIO* out = BIO_new_socket(fd, BIO_NOCLOSE);
  BIO* buffer = BIO_new(BIO_f_buffer());
  if (ssl == nullptr || in == nullptr || out == nullptr || buffer == nullptr ||
      BIO_set_write_buffer_size(buffer, kWriteBuffer) != 1) {
    SSL_free(ssl);
    BIO_free(in);
    BIO_free(out);
    BIO_free(buffer);
    fail(ErrorKind::internal, "tls", "cannot start TLS: " + ssl_errors());
  }
  SSL_set_bio(ssl, in, BIO_push(buffer, out));  // owns them all from here
  for (;;) {
    ERR_clear_error();
    const int r = server ? SSL_accept(ssl) : SSL_connect(ssl);
    if (r == 1) return ssl;
    const int error = SSL_get_error(ssl, r);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      if (wait_fd(fd, error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline)) continue;
      SSL_free(ssl);
      fail(ErrorKind::disconnected, "rpc", tcp.peer() + ": TLS handshake failed: timed out");
    }
    std::string why = error == SSL_ERROR_SSL ? ssl_errors() : "the connection closed";
    if (!server && why.find("wrong version number") != std::string::npos) {
      why += " (the other side does not speak TLS: a plain weft worker is HOST:PORT, without tls://)";
    }
    SSL_free(ssl);
    fail(ErrorKind::disconnected, "rpc", tcp.peer() + ": TLS handshake failed: " + why);
  }
}

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};

// Opens path for writing with mode (created fresh, or truncated).
std::unique_ptr<FILE, FileCloser> create_file(const std::filesystem::path& path, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) fail(ErrorKind::invalid_input, "tls", "cannot write " + path.string() + ": " + std::strerror(errno));
  ::fchmod(fd, mode);
  return std::unique_ptr<FILE, FileCloser>(::fdopen(fd, "w"));
}

}  // namespace

TlsServer::TlsServer(TlsServer&& o) noexcept : ctx_(o.ctx_), fingerprint_(std::move(o.fingerprint_)) { o.ctx_ = nullptr; }

TlsServer& TlsServer::operator=(TlsServer&& o) noexcept {
  std::swap(ctx_, o.ctx_);
  std::swap(fingerprint_, o.fingerprint_);
  return *this;
}

TlsServer::~TlsServer() {
  SSL_CTX_free(ctx_);
}

TlsServer TlsServer::load(const std::filesystem::path& cert_pem, const std::filesystem::path& key_pem) {
  TlsServer s;
  s.ctx_ = new_context(true);
  if (SSL_CTX_use_certificate_file(s.ctx_, cert_pem.c_str(), SSL_FILETYPE_PEM) != 1) {
    fail(ErrorKind::invalid_input, "tls", "cannot use certificate " + cert_pem.string() + ": " + ssl_errors());
  }
  if (SSL_CTX_use_PrivateKey_file(s.ctx_, key_pem.c_str(), SSL_FILETYPE_PEM) != 1) {
    fail(ErrorKind::invalid_input, "tls", "cannot use key " + key_pem.string() + ": " + ssl_errors());
  }
  if (SSL_CTX_check_private_key(s.ctx_) != 1) {
    fail(ErrorKind::invalid_input, "tls", "key " + key_pem.string() + " does not match certificate " + cert_pem.string());
  }
  s.fingerprint_ = hex_fingerprint(SSL_CTX_get0_certificate(s.ctx_));
  return s;
}

bool TlsServer::make_self_signed(const std::filesystem::path& cert_pem, const std::filesystem::path& key_pem) {
  if (std::filesystem::exists(cert_pem) && std::filesystem::exists(key_pem)) return false;
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), X509_free);
  if (!key || !cert) fail(ErrorKind::internal, "tls", "cannot make a key: " + ssl_errors());
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;  // a positive serial number
  std::unique_ptr<BIGNUM, decltype(&BN_free)> bn(BN_bin2bn(serial, sizeof serial, nullptr), BN_free);
  X509_set_version(cert.get(), 2);
  BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert.get()));
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 10L * 365 * 24 * 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("weft worker"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) <= 0) fail(ErrorKind::internal, "tls", "cannot sign: " + ssl_errors());
  std::filesystem::create_directories(cert_pem.parent_path().empty() ? "." : cert_pem.parent_path());
  {
    auto f = create_file(key_pem, 0600);
    if (!PEM_write_PrivateKey(f.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr))
      fail(ErrorKind::internal, "tls", "cannot write " + key_pem.string());
  }
  {
    auto f = create_file(cert_pem, 0644);
    if (!PEM_write_X509(f.get(), cert.get())) fail(ErrorKind::internal, "tls", "cannot write " + cert_pem.string());
  }
  return true;
}

bool looks_like_tls(Stream& s, Deadline deadline) {
  detail::TcpStream& tcp = tcp_of(s);
  if (!wait_fd(tcp.fd(), POLLIN, deadline)) {
    fail(ErrorKind::disconnected, "rpc", tcp.peer() + ": sent nothing before the handshake deadline");
  }
  uint8_t first = 0;
  const ssize_t n = ::recv(tcp.fd(), &first, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n <= 0) fail(ErrorKind::disconnected, "rpc", tcp.peer() + ": connection closed before the handshake");
  return first == 22;  // a TLS record of type handshake
}

std::unique_ptr<Stream> tls_accept(Stream& tcp, const TlsServer& server, Deadline deadline) {
  SSL* ssl = handshake(tcp_of(tcp), server.context(), true, deadline);
  return std::make_unique<TlsStream>(tcp, nullptr, ssl);
}

std::unique_ptr<Stream> tls_connect(std::unique_ptr<Stream> tcp, Deadline deadline, std::string* fingerprint) {
  SSL* ssl = handshake(tcp_of(*tcp), client_context(), false, deadline);
  X509* cert = SSL_get0_peer_certificate(ssl);
  *fingerprint = cert != nullptr ? hex_fingerprint(cert) : "";
  Stream& raw = *tcp;
  return std::make_unique<TlsStream>(raw, std::move(tcp), ssl);
}

std::string normalize_fingerprint(const std::string& text) {
  std::string s;
  for (char c : text) {
    if (c != ':') s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (s.rfind("sha256", 0) != 0) return "";
  s = s.substr(6);
  if (s.size() != 64 || !std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
    return "";
  return "sha256:" + s;
}

}  // namespace weft::rpc
