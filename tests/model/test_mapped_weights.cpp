// Weights in place: on the host CPU device a model's weights are the mapped
// file's own bytes (nothing copied), they outlive the GgufFile that mapped
// them, they give the same logits as copied weights, and they are read-only.
// A device that is not the host CPU, or a file whose tensors are not
// aligned for the kernels, gets copies.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "model/family_files.h"
#include "weft/backend/backend.h"
#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"
#include "weft/model/model.h"
#include "weft/runtime/executor.h"
#include "weft/testing/async.h"

namespace {

using weft::LayerPlacement;
using weft::model::LlamaModel;
using weft::Executor;
using weft::model::LoadOptions;

std::string family(const std::string& name) { return (family_files::dir() / (name + ".gguf")).string(); }

// A prompt and 8 greedy tokens; every eval's logits, concatenated.
std::vector<float> run(Executor& m) {
  const int64_t vocab = m.params().n_vocab;
  std::vector<int32_t> seq{1, 17, 42, 99, 5};
  std::vector<float> all = m.eval(seq, 0);
  for (int i = 0; i < 8; ++i) {
    seq.push_back(weft::model::greedy(&all[all.size() - static_cast<size_t>(vocab)], static_cast<int>(vocab)));
    const std::vector<float> l = m.eval({&seq.back(), 1}, static_cast<int64_t>(seq.size()) - 1);
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

size_t weight_bytes(const weft::GgufFile& f) {
  size_t n = 0;
  for (const auto& t : f.tensors()) n += t.nbytes;
  return n;
}

class MappedWeights : public ::testing::TestWithParam<std::string> {};

TEST_P(MappedWeights, SameLogitsAsCopiesAndOutliveTheFile) {
  auto cpu = weft::make_cpu_device(2);
  auto copied_file = weft::GgufFile::open(family(GetParam()));
  Executor copied(*copied_file, *cpu, 64, {}, LoadOptions{.map_weights = false});
  EXPECT_EQ(copied.mapped_weight_bytes(), 0u);

  auto file = weft::GgufFile::open(family(GetParam()));
  // Every weight but the rope factors some families keep on the host.
  const size_t in_file = weight_bytes(*file);
  Executor mapped(*file, *cpu, 64);
  EXPECT_GT(mapped.mapped_weight_bytes(), in_file / 2);
  EXPECT_LE(mapped.mapped_weight_bytes(), in_file);
  file.reset();  // the mapping stays while the model holds it

  const std::vector<float> want = run(copied);
  const std::vector<float> got = run(mapped);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(Families, MappedWeights, ::testing::Values("llama", "phi3_long", "gemma2"),
                         [](const auto& info) { return info.param; });

TEST(MappedWeightsRules, OnlyTheHostCpuMapsAndSplitsAgree) {
  auto file = weft::GgufFile::open(family("llama"));
  const int64_t n_layer = weft::model::LlamaParams::from_gguf(*file).n_layer;
  auto cpu = weft::make_cpu_device(2);
  weft::AsyncOptions o;
  o.isolated_memory = true;
  auto isolated = weft::make_async_device(o);
  const std::vector<LayerPlacement> pl{{cpu.get(), 0, 1}, {isolated.get(), 1, n_layer}};
  Executor split(*file, pl, 64);
  Executor split_copied(*file, pl, 64, {}, LoadOptions{.map_weights = false});
  // The CPU's share (embedding, layer 0) is mapped; the other device's is not.
  EXPECT_GT(split.mapped_weight_bytes(), 0u);
  EXPECT_LT(split.mapped_weight_bytes(), weight_bytes(*file) / 2 + weight_bytes(*file) / 4);
  const std::vector<float> a = run(split), b = run(split_copied);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);

  Executor on_async(*file, *isolated, 64);
  EXPECT_EQ(on_async.mapped_weight_bytes(), 0u);
}

TEST(MappedWeightsRules, AFileAlignedBelowTheKernelsNeedsIsCopied) {
  auto src = weft::GgufFile::open(family("llama"));
  weft::GgufWriter w;
  for (const std::string& key : src->keys())
    if (key != "general.alignment") w.set_value(key, *src->find(key));
  w.set_u32("general.alignment", 2);
  for (const auto& t : src->tensors()) w.add_tensor(t.name, t.dtype(), {t.ne, static_cast<size_t>(t.n_dims)}, src->tensor_data(t));
  const std::string path = (std::filesystem::temp_directory_path() / "weft_mapped_align2.gguf").string();
  w.write(path);
  auto file = weft::GgufFile::open(path);
  std::filesystem::remove(path);  // the mapping keeps the bytes
  auto cpu = weft::make_cpu_device(1);
  Executor m(*file, *cpu, 64);
  EXPECT_EQ(m.mapped_weight_bytes(), 0u);
  Executor ref(*src, *cpu, 64, {}, LoadOptions{.map_weights = false});
  const std::vector<float> a = run(m), b = run(ref);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

TEST(MappedWeightsRules, MappedWeightsAreReadOnly) {
  auto file = weft::GgufFile::open(family("llama"));
  auto cpu = weft::make_cpu_device(1);
  weft::Context ctx;
  weft::Tensor* t = ctx.new_tensor(weft::DType::f32, {4});
  const float data[4] = {1, 2, 3, 4};
  auto buf = weft::wrap_host_memory(cpu->default_buffer_type(), nullptr, data, sizeof data);
  weft::bind_tensor(*t, *buf, 0);
  float out[4] = {};
  weft::tensor_get(*t, out, 0, sizeof out);
  EXPECT_EQ(out[3], 4.0f);
  try {
    weft::tensor_set(*t, out, 0, sizeof out);
    FAIL() << "a write was accepted";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("read-only"), std::string::npos) << e.what();
  }
  EXPECT_THROW(buf->clear(0), weft::Error);
  weft::AsyncOptions o;
  o.isolated_memory = true;
  auto isolated = weft::make_async_device(o);
  EXPECT_THROW(weft::wrap_host_memory(isolated->default_buffer_type(), nullptr, data, sizeof data), weft::Error);
}

}  // namespace
