// Split GGUF models end to end: family models (tests/model/families, with
// float64 reference logits from numpy) rewritten by GgufWriter::write_split
// run from their first part exactly as from the single file, locally (weights
// mapped in place from every part) and split over a worker in this process;
// quantize_file reads a split input and writes a split output that reopens
// to the single output's tensors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "model/family_files.h"
#include "temp_dir.h"
#include "weft/backend/cpu.h"
#include "weft/gguf/gguf.h"
#include "weft/model/model.h"
#include "weft/model/quantize.h"
#include "weft/rpc/client.h"
#include "weft/rpc/worker.h"
#include "weft/runtime/executor.h"

namespace {

namespace fs = std::filesystem;
using weft::GgufFile;
using weft::LayerPlacement;
using weft::model::LlamaModel;
using weft::Executor;

constexpr double kSplitTolerance = 1e-4;  // as test_families.cpp: f32 against float64

using weft::test::TempDir;

// f's metadata and tensors as a split model of at most max_tensors a part.
std::vector<std::string> write_split_copy(const GgufFile& f, const std::string& prefix, uint64_t max_tensors) {
  weft::GgufWriter w;
  for (const std::string& k : f.keys()) w.set_value(k, *f.find(k));
  for (const weft::GgufTensorInfo& t : f.tensors())
    w.add_tensor(t.name, t.dtype(), std::span<const int64_t>(t.ne, static_cast<size_t>(t.n_dims)), f.tensor_data(t));
  return w.write_split(prefix, weft::GgufSplitLimits{0, max_tensors});
}

using weft::test::read_bytes;

class SplitGguf : public ::testing::TestWithParam<std::string> {};

// Every eval of the reference through both models: the split model's logits
// equal the single file's bit for bit, and both are near the float64 ones.
void expect_same(Executor& single, Executor& split, const family_files::Reference& ref) {
  for (size_t e = 0; e < ref.evals.size(); ++e) {
    const family_files::Eval& ev = ref.evals[e];
    const std::vector<float> a = single.eval(ev.tokens, ev.n_past);
    const std::vector<float> b = split.eval(ev.tokens, ev.n_past);
    ASSERT_EQ(b.size(), ev.logits.size());
    EXPECT_EQ(b, a) << "eval " << e;
    for (size_t t = 0; t < ev.tokens.size(); ++t) {
      const size_t at = t * static_cast<size_t>(ref.n_vocab);
      EXPECT_LE(family_files::normalized_error(&b[at], &ev.logits[at], ref.n_vocab), kSplitTolerance)
          << "eval " << e << " token " << t;
    }
  }
}

TEST_P(SplitGguf, RunsAsTheSingleFile) {
  const fs::path gguf = family_files::dir() / (GetParam() + ".gguf");
  const family_files::Reference ref = family_files::read_reference(family_files::dir() / (GetParam() + ".ref"));
  TempDir tmp(GetParam());
  auto single = GgufFile::open(gguf.string());
  const std::vector<std::string> paths = write_split_copy(*single, tmp / GetParam(), 4);
  ASSERT_GE(paths.size(), 3u);
  auto split = GgufFile::open(paths.front());
  ASSERT_EQ(split->parts().size(), paths.size());
  ASSERT_EQ(split->tensors().size(), single->tensors().size());

  auto cpu = weft::make_cpu_device(2);
  {
    Executor a(*single, *cpu, ref.n_ctx);
    Executor b(*split, *cpu, ref.n_ctx);
    // Weights in place from every part, as from the single file.
    EXPECT_GT(b.mapped_weight_bytes(), 0u);
    EXPECT_EQ(b.mapped_weight_bytes(), a.mapped_weight_bytes());
    expect_same(a, b, ref);
  }

  // Layer 0 here, the rest on a worker: the split model's weights uploaded
  // from its parts give the single file's logits.
  auto worker_cpu = weft::make_cpu_device(1);
  weft::rpc::WorkerOptions o;
  o.log = false;
  weft::rpc::Worker worker(std::vector<weft::Device*>{worker_cpu.get()}, o);
  worker.start();
  auto remote = weft::make_rpc_devices("127.0.0.1:" + std::to_string(worker.port()));
  const int64_t n_layer = weft::model::LlamaParams::from_gguf(*split).n_layer;
  const std::vector<LayerPlacement> pl{{cpu.get(), 0, 1}, {remote.at(0).get(), 1, n_layer}};
  Executor a(*single, pl, ref.n_ctx);
  Executor b(*split, pl, ref.n_ctx);
  expect_same(a, b, ref);
}

INSTANTIATE_TEST_SUITE_P(Families, SplitGguf, ::testing::Values("llama", "qwen2moe"),
                         [](const auto& info) { return info.param; });

// quantize_file from a split input gives the bytes it gives from the single
// file; with split limits, parts that reopen to the single output's tensors.
TEST(SplitGgufQuantize, SplitInAndOut) {
  TempDir tmp("quantize");
  const std::string in = (family_files::dir() / "llama.gguf").string();
  weft::model::QuantizeOptions o;
  o.mix = weft::model::QuantMix::Q8_0;
  o.threads = 2;
  const weft::model::QuantizeStats one = weft::model::quantize_file(in, tmp / "one.gguf", o);
  EXPECT_EQ(one.out_paths, std::vector<std::string>{tmp / "one.gguf"});

  auto single_in = GgufFile::open(in);
  const std::vector<std::string> in_parts = write_split_copy(*single_in, tmp / "in", 5);
  ASSERT_GE(in_parts.size(), 2u);
  const weft::model::QuantizeStats again = weft::model::quantize_file(in_parts.front(), tmp / "again.gguf", o);
  uint64_t in_bytes = 0;
  for (const std::string& p : in_parts) in_bytes += fs::file_size(p);
  EXPECT_EQ(again.in_bytes, in_bytes);
  EXPECT_EQ(read_bytes(tmp / "again.gguf"), read_bytes(tmp / "one.gguf"));  // split.* keys dropped

  // --split-max-size: a third of the output's tensor bytes a part.
  auto ref = GgufFile::open(tmp / "one.gguf");
  uint64_t data = 0;
  for (const weft::GgufTensorInfo& t : ref->tensors()) data += (t.nbytes + 31) / 32 * 32;
  o.split.max_bytes = data / 3 + 1;
  const weft::model::QuantizeStats parts = weft::model::quantize_file(in, tmp / "out.gguf", o);
  ASSERT_GE(parts.out_paths.size(), 3u);
  const auto n_parts = static_cast<uint32_t>(parts.out_paths.size());
  for (uint32_t i = 0; i < n_parts; ++i) EXPECT_EQ(parts.out_paths[i], weft::gguf_split_path(tmp / "out", i, n_parts));
  EXPECT_FALSE(fs::exists(tmp / "out.gguf"));
  uint64_t out_bytes = 0;
  for (const std::string& p : parts.out_paths) {
    out_bytes += fs::file_size(p);
    uint64_t part_data = 0;
    auto part = GgufFile::open_part(p);
    for (const weft::GgufTensorInfo& t : part->tensors()) part_data += (t.nbytes + 31) / 32 * 32;
    EXPECT_TRUE(part_data <= o.split.max_bytes || part->tensors().size() == 1) << p;
  }
  EXPECT_EQ(parts.out_bytes, out_bytes);

  auto split = GgufFile::open(parts.out_paths.front());
  std::vector<std::string> keys = ref->keys();
  for (const char* k : {"split.no", "split.count", "split.tensors.count"}) keys.push_back(k);
  EXPECT_EQ(split->keys(), keys);
  ASSERT_EQ(split->tensors().size(), ref->tensors().size());
  for (size_t i = 0; i < ref->tensors().size(); ++i) {
    const weft::GgufTensorInfo& a = ref->tensors()[i];
    const weft::GgufTensorInfo& b = split->tensors()[i];
    ASSERT_EQ(b.name, a.name);
    ASSERT_EQ(b.type, a.type);
    ASSERT_EQ(b.nbytes, a.nbytes);
    EXPECT_EQ(std::memcmp(split->tensor_data(b), ref->tensor_data(a), a.nbytes), 0) << a.name;
  }
}

// A cancel while the last part is being written leaves no part behind: the
// parts written so far wait under temporary names and are removed.
TEST(SplitGgufQuantize, CancelLeavesNoPart) {
  TempDir tmp("cancel");
  const std::string in = (family_files::dir() / "llama.gguf").string();
  std::string before_last;
  {
    auto f = GgufFile::open(in);
    before_last = f->tensors().at(f->tensors().size() - 2).name;
  }
  std::atomic<bool> cancel{false};
  weft::model::QuantizeOptions o;
  o.mix = weft::model::QuantMix::Q8_0;
  o.threads = 1;
  o.split.max_tensors = 3;
  o.cancel = &cancel;
  size_t temporaries = 0;
  o.progress = [&](int64_t, int64_t, const std::string& tensor) {
    if (tensor != before_last) return;
    for (const auto& e : fs::directory_iterator(tmp.path))
      temporaries += e.path().filename().string().find(".gguf.tmp-") != std::string::npos ? 1 : 0;
    cancel = true;
  };
  EXPECT_THROW(weft::model::quantize_file(in, tmp / "out.gguf", o), weft::Error);
  EXPECT_GE(temporaries, 2u);  // earlier parts were written, under temporary names
  EXPECT_TRUE(fs::is_empty(tmp.path));
}

}  // namespace
