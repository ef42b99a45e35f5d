// TLS over a TCP stream (OpenSSL, TLS 1.3 only): what `weft worker --tls`
// serves and what a host dials as tls://HOST:PORT (docs/security.md, "TLS").
//
// There is no certificate authority: a worker has its own certificate
// (self-signed, made on first start, or given), and a host trusts it by its
// fingerprint, the SHA-256 of the certificate's DER bytes, written
// "sha256:" + 64 lowercase hex digits. The host checks the fingerprint after
// the handshake (pinning); nothing else about the certificate matters.
//
//   // worker
//   TlsServer server = TlsServer::load(cert_pem, key_pem);    // or make_self_signed() first
//   if (!looks_like_tls(tcp, deadline)) refuse_plain(tcp);      // a plain HELLO: tell it so
//   auto tls = tls_accept(*tcp, server, deadline);             // tcp outlives tls
//   // host
//   std::string fingerprint;
//   auto tls = tls_connect(std::move(tcp), deadline, &fingerprint);  // then compare with the pin
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "transport/stream.h"

typedef struct ssl_ctx_st SSL_CTX;  // NOLINT: OpenSSL's own spelling

namespace weft::rpc {

// A worker's certificate and key, loaded once; shared by every session.
class TlsServer {
 public:
  // Throws Error(invalid_input, "[tls] ...") naming the file that is missing,
  // unreadable or not a matching certificate and key.
  static TlsServer load(const std::filesystem::path& cert_pem, const std::filesystem::path& key_pem);
  // Writes a new self-signed certificate (EC P-256, 10 years) and its key
  // (mode 0600) unless both files exist already. Returns whether it made them.
  static bool make_self_signed(const std::filesystem::path& cert_pem, const std::filesystem::path& key_pem);

  TlsServer(TlsServer&&) noexcept;
  TlsServer& operator=(TlsServer&&) noexcept;
  ~TlsServer();

  const std::string& fingerprint() const { return fingerprint_; }
  SSL_CTX* context() const { return ctx_; }

 private:
  TlsServer() = default;
  SSL_CTX* ctx_ = nullptr;
  std::string fingerprint_;
};

// Whether the first byte the client sent opens a TLS handshake (a record of
// type 22). Waits for it until deadline; throws Error(disconnected) when
// nothing came.
bool looks_like_tls(Stream& tcp, Stream::Deadline deadline);

// The handshake, as server or client, over a stream from tcp_connect or a
// listener (anything else is Error(internal)). Throws Error(disconnected,
// "[rpc] PEER: TLS handshake failed: ...") when it fails or passes deadline.
// tls_accept's stream borrows tcp, which must outlive it (the worker's slot
// keeps both); tls_connect's owns it, and sets *fingerprint to the server
// certificate's.
std::unique_ptr<Stream> tls_accept(Stream& tcp, const TlsServer& server, Stream::Deadline deadline);
std::unique_ptr<Stream> tls_connect(std::unique_ptr<Stream> tcp, Stream::Deadline deadline, std::string* fingerprint);

// "sha256:" + 64 lowercase hex digits, or "" when text is not one (case and
// ':' between byte pairs are forgiven: "SHA256:AB:CD:..." as openssl prints it).
std::string normalize_fingerprint(const std::string& text);

}  // namespace weft::rpc
