// weft serve over HTTPS (ServeOptions::tls_cert/tls_key, --tls-cert/--tls-key):
// a completion over TLS equals the same request over plain HTTP, a plain
// HTTP client gets no answer from the HTTPS port, and a certificate that
// cannot be loaded is refused at start, naming the files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "weft/core/error.h"
#include "weft/model/demo_model.h"
#include "weft/rpc/worker.h"
#include "weft/serve/server.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ServerHttps : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("weft_https_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    weft::model::write_demo_model((dir_ / "m.gguf").string(), weft::model::tiny_demo_spec());
    weft::rpc::make_self_signed_certificate(dir_ / "cert.pem", dir_ / "key.pem");
  }
  void TearDown() override { fs::remove_all(dir_); }

  weft::serve::ServeOptions options(bool tls) const {
    weft::serve::ServeOptions o;
    o.session.model = (dir_ / "m.gguf").string();
    o.session.device_options.cpu_threads = 1;
    o.ctx_size = 128;
    o.port = 0;
    o.log = false;
    if (tls) {
      o.tls_cert = (dir_ / "cert.pem").string();
      o.tls_key = (dir_ / "key.pem").string();
    }
    return o;
  }

  static std::string completion(httplib::Client& c) {
    const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"temperature", 0}};
    auto r = c.Post("/v1/completions", body.dump(), "application/json");
    if (!r) return "(no response: " + httplib::to_string(r.error()) + ")";
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body)["choices"][0]["text"].get<std::string>();
  }

  fs::path dir_;
};

TEST_F(ServerHttps, ACompletionOverHttpsEqualsPlainHttp) {
  weft::serve::Server https(options(true)), http(options(false));
  https.start();
  http.start();
  https.wait_ready();
  http.wait_ready();
  httplib::Client secure("https://127.0.0.1:" + std::to_string(https.port()));
  secure.enable_server_certificate_verification(false);  // self-signed: what is tested is the channel
  httplib::Client plain("http://127.0.0.1:" + std::to_string(http.port()));
  const std::string text = completion(secure);
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text, completion(plain));
  // Plain HTTP to the HTTPS port: no HTTP answer comes back.
  httplib::Client wrong("http://127.0.0.1:" + std::to_string(https.port()));
  wrong.set_read_timeout(2, 0);
  auto r = wrong.Get("/health");
  EXPECT_FALSE(r && r->status == 200) << "HTTPS port answered plain HTTP";
  https.stop();
  http.stop();
}

TEST_F(ServerHttps, ACertificateThatCannotBeLoadedIsRefused) {
  weft::serve::ServeOptions o = options(true);
  o.tls_key = (dir_ / "missing.pem").string();
  try {
    weft::serve::Server s(o);
    FAIL() << "a missing key was accepted";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
    EXPECT_NE(std::string(e.what()).find("missing.pem"), std::string::npos) << e.what();
  }
  o.tls_key.clear();
  EXPECT_THROW(weft::serve::Server{o}, weft::Error);
}

}  // namespace
