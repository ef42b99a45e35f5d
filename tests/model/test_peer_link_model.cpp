// Peer links in a real model run (issue 35 item 4): a model whose layers are
// split over two workers sends each token's activations from the first
// worker to the second directly, not through the host. The text alone
// cannot show it (a silent fallback through the host gives the same
// tokens); the host's traffic does: with links, the host neither reads the
// first worker's activation nor sends it to the second, and waits once per
// token (the read of the logits); through the host (RpcOptions::peer_links
// false) it does both. The tokens are the same either way.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "rpc/local_workers.h"
#include "weft/gguf/gguf.h"
#include "weft/model/demo_model.h"
#include "weft/model/model.h"
#include "weft/runtime/executor.h"
#include "weft/rpc/client.h"

namespace {

namespace fs = std::filesystem;
using weft::LayerPlacement;
using weft::model::LlamaModel;
using weft::Executor;
using weft::model::LogitRows;

constexpr int64_t kLinkCtx = 64;
constexpr int kLinkSteps = 4;

struct Traffic {
  std::vector<int32_t> tokens;
  // Per generated token, averaged over kLinkSteps: what the host read from the
  // first worker, sent to the second, and its round trips to both.
  double from_first = 0, to_second = 0, round_trips = 0;
};

Traffic run(const weft::GgufFile& file, bool peer_links) {
  weft::testing::LocalWorkers workers(2);
  weft::RpcOptions o;
  o.peer_links = peer_links;
  const std::string a = workers.endpoint(0), b = workers.endpoint(1);
  auto wa = weft::make_rpc_devices(a, o);
  auto wb = weft::make_rpc_devices(b, o);
  const std::vector<LayerPlacement> pl{{wa.at(0).get(), 0, 1}, {wb.at(0).get(), 1, 2}};
  Executor m(file, pl, kLinkCtx);
  const int vocab = static_cast<int>(m.params().n_vocab);
  Traffic t;
  std::vector<float> logits;
  m.eval(std::vector<int32_t>{1, 17, 33, 49}, 0, logits, LogitRows::last);
  int64_t n_past = 4;
  int32_t next = weft::model::greedy(logits.data(), vocab);
  m.eval({&next, 1}, n_past++, logits, LogitRows::last);  // the first single-token graphs are sent whole
  const weft::RpcStats a0 = weft::rpc_stats(a), b0 = weft::rpc_stats(b);
  for (int step = 0; step < kLinkSteps; ++step) {
    next = weft::model::greedy(logits.data(), vocab);
    t.tokens.push_back(next);
    m.eval({&next, 1}, n_past++, logits, LogitRows::last);
  }
  const weft::RpcStats a1 = weft::rpc_stats(a), b1 = weft::rpc_stats(b);
  t.from_first = static_cast<double>(a1.bytes_received - a0.bytes_received) / kLinkSteps;
  t.to_second = static_cast<double>(b1.bytes_sent - b0.bytes_sent) / kLinkSteps;
  t.round_trips = static_cast<double>(a1.round_trips - a0.round_trips + b1.round_trips - b0.round_trips) / kLinkSteps;
  EXPECT_EQ(a1.peer_link_failure, "");
  return t;
}

TEST(PeerLinkModel, ActivationsGoWorkerToWorkerNotThroughTheHost) {
  const fs::path path = fs::temp_directory_path() / ("weft_peer_model_" + std::to_string(::getpid()) + ".gguf");
  weft::model::DemoModelSpec spec = weft::model::tiny_demo_spec();
  spec.n_embd = 128;  // an activation row of 512 bytes: well above the frames' own bytes
  spec.tied = false;  // the output on the second worker
  weft::model::write_demo_model(path.string(), spec);
  auto file = weft::GgufFile::open(path.string());
  const double activation = static_cast<double>(spec.n_embd) * sizeof(float);
  const Traffic linked = run(*file, true);
  const Traffic host = run(*file, false);
  fs::remove(path);
  EXPECT_EQ(linked.tokens, host.tokens);
  // Through the host: the activation comes back from the first worker and
  // goes out to the second.
  EXPECT_GE(host.from_first, activation);
  EXPECT_GE(host.to_second - linked.to_second, 0.9 * activation)
      << "linked " << linked.to_second << " B, through the host " << host.to_second << " B per token";
  // Linked: no activation reaches the host, and one wait per token.
  EXPECT_LT(linked.from_first, activation / 2) << linked.from_first << " B per token from the first worker";
  EXPECT_LE(linked.round_trips, 1.0) << linked.round_trips << " round trips per token";
}

}  // namespace
