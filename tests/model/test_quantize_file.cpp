// quantize_file (include/weft/model/quantize.h) end to end on small generated
// llama files: every mix writes the types its plan gives, metadata equal but
// for general.file_type and general.quantization_version, copied tensors
// byte for byte, converted rows byte for byte what quantize_row_reference
// (or from_f32 for the 16-bit types, q8_0 and q4_0) gives; the thread count
// does not change a byte; errors and cancels leave no file behind. Also the
// GgufWriter's streaming producers the rewrite relies on.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "sanitized.h"
#include "temp_dir.h"
#include "weft/core/error.h"
#include "weft/core/quant.h"
#include "weft/core/splitmix64.h"
#include "weft/gguf/gguf.h"
#include "weft/model/demo_model.h"
#include "weft/model/quantize.h"

namespace {

namespace fs = std::filesystem;
using weft::DType;
using weft::GgufFile;
using weft::GgufWriter;
using weft::model::QuantizeOptions;
using weft::model::QuantMix;

// A fresh folder per test, removed with everything in it.
using weft::test::TempDir;

using weft::test::read_bytes;

struct ModelSpec {
  int64_t n_layer = 2, n_embd = 256, n_ff = 352, n_vocab = 300, n_head = 4, n_head_kv = 1;
  float big_row = 0;       // when set, row 3 of blk.0.attn_q is scaled to reach this magnitude
  bool nan_last = false;   // a NaN in the last tensor's last row
  std::string arch = "llama";
};

// A llama GGUF in f32, f16 and bf16 (n_ff 352: ffn_down's rows are not a
// multiple of 256), with metadata of many types. The writer keeps pointers
// into data, so the vectors live in the returned object until written.
void write_model(const std::string& path, const ModelSpec& s) {
  GgufWriter w;
  std::vector<std::vector<uint8_t>> data;
  data.reserve(64);
  uint64_t state = 1234;
  auto add = [&](const std::string& name, DType type, std::vector<int64_t> ne, float scale) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    std::vector<float> f(static_cast<size_t>(n));
    for (float& x : f) x = scale * (static_cast<float>(weft::splitmix64(state) >> 40) / 8388608.0f - 1.0f);
    if (s.big_row > 0 && name == "blk.0.attn_q.weight")
      for (int64_t i = 0; i < ne[0]; ++i) f[static_cast<size_t>(3 * ne[0] + i)] *= s.big_row / scale;
    data.emplace_back(weft::row_bytes(type, n));
    weft::from_f32(type, f.data(), data.back().data(), n);
    w.add_tensor(name, type, ne, data.back().data());
  };
  const std::string a = s.arch + ".";
  w.set_string("general.architecture", s.arch);
  w.set_string("general.name", "quantize test model");
  w.set_u32("general.file_type", 1);  // replaced in place
  w.set_u32(a + "block_count", static_cast<uint32_t>(s.n_layer));
  w.set_u32(a + "embedding_length", static_cast<uint32_t>(s.n_embd));
  w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.set_u32(a + "attention.head_count", static_cast<uint32_t>(s.n_head));
  w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_u64("test.u64", 1ull << 40);
  w.set_i32("test.i32", -7);
  w.set_bool("test.bool", true);
  w.set_array("tokenizer.ggml.tokens", std::vector<std::string>{"<unk>", "<s>", "</s>", "a", "b"});
  w.set_array("tokenizer.ggml.scores", std::vector<float>{0, 0, 0, -1.5f, -2.5f});
  w.set_array("test.ints", std::vector<int32_t>{1, -2, 3});

  const int64_t kv = s.n_embd / s.n_head * s.n_head_kv;
  add("token_embd.weight", DType::f16, {s.n_embd, s.n_vocab}, 1.0f);
  for (int64_t i = 0; i < s.n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    add(b + "attn_norm.weight", DType::f32, {s.n_embd}, 1.0f);
    add(b + "attn_q.weight", DType::f32, {s.n_embd, s.n_embd}, 0.1f);
    add(b + "attn_k.weight", DType::f32, {s.n_embd, kv}, 0.1f);
    add(b + "attn_v.weight", DType::bf16, {s.n_embd, kv}, 0.1f);
    add(b + "attn_output.weight", DType::f16, {s.n_embd, s.n_embd}, 0.1f);
    add(b + "ffn_norm.weight", DType::f32, {s.n_embd}, 1.0f);
    add(b + "ffn_gate.weight", DType::bf16, {s.n_embd, s.n_ff}, 0.1f);
    add(b + "ffn_up.weight", DType::f16, {s.n_embd, s.n_ff}, 0.1f);
    add(b + "ffn_down.weight", DType::f32, {s.n_ff, s.n_embd}, 0.1f);
  }
  add("output_norm.weight", DType::f32, {s.n_embd}, 1.0f);
  add("output.weight", DType::f32, {s.n_embd, s.n_vocab}, 0.1f);
  if (s.nan_last) {
    std::vector<uint8_t>& last = data.back();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(last.data() + last.size() - 4 * 5, &nan, 4);  // row n_vocab - 1, column n_embd - 5
  }
  w.write(path);
}

bool same_value(const weft::GgufValue& a, const weft::GgufValue& b) {
  if (a.type != b.type || a.u != b.u || a.i != b.i || a.s != b.s) return false;
  if (!(a.f == b.f || (std::isnan(a.f) && std::isnan(b.f)))) return false;
  if (a.type != weft::GgufType::array) return true;
  const auto x = a.arr.bytes(), y = b.arr.bytes();
  return a.arr.elem_type() == b.arr.elem_type() && a.arr.size() == b.arr.size() &&
         std::equal(x.begin(), x.end(), y.begin(), y.end());
}

// The bytes a converted row must have: the reference quantizer for the types
// of weft/core/quant.h, the dtype conversion for the others.
std::vector<uint8_t> reference_row(DType from, const uint8_t* in, DType to, int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  weft::to_f32(from, in, x.data(), n);
  std::vector<uint8_t> out(weft::row_bytes(to, n));
  const uint32_t id = weft::traits(to).gguf_id;
  if (weft::quant_type_info(id) != nullptr)
    weft::quantize_row_reference(id, x.data(), out.data(), n);
  else
    weft::from_f32(to, x.data(), out.data(), n);
  return out;
}

// Checks out against in for the mix: tensors, types, metadata, bytes.
void check_output(const std::string& in_path, const std::string& out_path, QuantMix mix, bool pure = false) {
  SCOPED_TRACE(std::string(weft::model::quant_mix_info(mix).name));
  auto in = GgufFile::open(in_path);
  auto out = GgufFile::open(out_path);
  const auto& ti = in->tensors();
  const auto& to = out->tensors();
  ASSERT_EQ(ti.size(), to.size());

  std::vector<weft::model::QuantTensorDesc> descs(ti.size());
  for (size_t i = 0; i < ti.size(); ++i) {
    descs[i].name = ti[i].name;
    std::copy(std::begin(ti[i].ne), std::end(ti[i].ne), descs[i].ne);
  }
  const auto plans = weft::model::plan_quant_types(weft::model::quant_model_facts(*in), descs, mix, pure);
  for (size_t i = 0; i < ti.size(); ++i) {
    SCOPED_TRACE(ti[i].name);
    ASSERT_EQ(to[i].name, ti[i].name);
    ASSERT_EQ(to[i].n_dims, ti[i].n_dims);
    for (int d = 0; d < 4; ++d) ASSERT_EQ(to[i].ne[d], ti[i].ne[d]);
    const DType from = ti[i].dtype(), want = plans[i].keep ? from : plans[i].type;
    ASSERT_EQ(to[i].dtype(), want);
    const auto* a = static_cast<const uint8_t*>(in->tensor_data(ti[i]));
    const auto* b = static_cast<const uint8_t*>(out->tensor_data(to[i]));
    if (from == want) {
      ASSERT_EQ(ti[i].nbytes, to[i].nbytes);
      EXPECT_EQ(std::memcmp(a, b, ti[i].nbytes), 0);
      continue;
    }
    const int64_t ne0 = ti[i].ne[0], rows = ti[i].ne[1] * ti[i].ne[2] * ti[i].ne[3];
    const size_t in_row = weft::row_bytes(from, ne0), out_row = weft::row_bytes(want, ne0);
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<uint8_t> ref = reference_row(from, a + static_cast<size_t>(r) * in_row, want, ne0);
      ASSERT_EQ(std::memcmp(ref.data(), b + static_cast<size_t>(r) * out_row, out_row), 0) << "row " << r;
    }
    // And what a reader decodes from it is what the reference decodes.
    std::vector<float> x(static_cast<size_t>(ne0)), y(static_cast<size_t>(ne0));
    weft::to_f32(want, b, x.data(), ne0);
    const uint32_t id = weft::traits(want).gguf_id;
    if (weft::quant_type_info(id) != nullptr) {
      weft::dequantize_row(id, b, y.data(), ne0);
      EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * 4), 0);
    }
  }

  // Metadata: the same keys in the same order, the same values, but for the
  // two keys the quantizer sets (in place when the input has them, else
  // appended in this order).
  std::vector<std::string> ki = in->keys(), ko = out->keys();
  if (!in->has("general.quantization_version")) ki.push_back("general.quantization_version");
  if (!in->has("general.file_type")) ki.push_back("general.file_type");
  EXPECT_EQ(ki, ko);
  for (const std::string& k : in->keys()) {
    if (k == "general.file_type") continue;
    EXPECT_TRUE(same_value(*in->find(k), *out->find(k))) << k;
  }
  EXPECT_EQ(out->get_u32("general.file_type"), weft::model::quant_mix_info(mix).ftype);
  EXPECT_EQ(out->find("general.file_type")->type, weft::GgufType::u32);
  EXPECT_EQ(out->get_u32("general.quantization_version"), 2u);
}

QuantizeOptions options(QuantMix mix, int threads = 2) {
  QuantizeOptions o;
  o.mix = mix;
  o.threads = threads;
  return o;
}

TEST(QuantizeFile, EveryMixWritesItsPlan) {
  TempDir t("every_mix");
  const std::string in = t / "in.gguf";
  write_model(in, {});
  for (const weft::model::QuantMixInfo& m : weft::model::quant_mixes()) {
    const std::string out = t / (std::string(m.name) + ".gguf");
    const weft::model::QuantizeStats s = weft::model::quantize_file(in, out, options(m.mix));
    check_output(in, out, m.mix);
    EXPECT_EQ(s.n_tensors, 2 + 9 * 2 + 1);
    EXPECT_EQ(s.out_bytes, fs::file_size(out));
    EXPECT_EQ(s.in_bytes, fs::file_size(in));
    EXPECT_GT(s.converted_weights, 0);
  }
  // Some of what the plan gives, spelled out (TwoLayers in test_quantize_mix.cpp
  // has the rest): Q4_K_M raises layer 1's attn_v and ffn_down; ffn_down's
  // rows of 352 fall back (q4_K -> q5_0, q6_K -> q8_0).
  auto f = GgufFile::open(t / "Q4_K_M.gguf");
  auto type = [&](const std::string& n) { return std::string(weft::dtype_name(f->find_tensor(n)->dtype())); };
  EXPECT_EQ(type("token_embd.weight"), "q4_K");
  EXPECT_EQ(type("output.weight"), "q6_K");
  EXPECT_EQ(type("output_norm.weight"), "f32");
  EXPECT_EQ(type("blk.0.attn_v.weight"), "q4_K");
  EXPECT_EQ(type("blk.1.attn_v.weight"), "q6_K");
  EXPECT_EQ(type("blk.0.ffn_down.weight"), "q5_0");
  EXPECT_EQ(type("blk.1.ffn_down.weight"), "q8_0");
  EXPECT_EQ(type("blk.1.ffn_up.weight"), "q4_K");
  // Q8_0 leaves the output in q8_0; F16 converts f32 and bf16 and copies f16.
  auto q8 = GgufFile::open(t / "Q8_0.gguf");
  EXPECT_EQ(q8->find_tensor("output.weight")->dtype(), DType::q8_0);
  auto f16 = GgufFile::open(t / "F16.gguf");
  EXPECT_EQ(f16->find_tensor("blk.0.attn_v.weight")->dtype(), DType::f16);
  EXPECT_EQ(f16->find_tensor("blk.0.attn_norm.weight")->dtype(), DType::f32);
}

TEST(QuantizeFile, PureAndSummary) {
  TempDir t("pure");
  const std::string in = t / "in.gguf", out = t / "out.gguf";
  write_model(in, {});
  QuantizeOptions o = options(QuantMix::Q4_K_M);
  o.pure = true;
  const weft::model::QuantizeStats s = weft::model::quantize_file(in, out, o);
  check_output(in, out, QuantMix::Q4_K_M, true);
  auto f = GgufFile::open(out);
  EXPECT_EQ(f->find_tensor("output.weight")->dtype(), DType::q4_K);
  EXPECT_EQ(f->find_tensor("blk.1.ffn_down.weight")->dtype(), DType::q5_0);  // the fallback still applies
  // 2 norms per layer and output_norm stay; the other 16 tensors are converted, 2 by fallback.
  EXPECT_EQ(s.n_converted, 16);
  EXPECT_EQ(s.n_fallback, 2);
  int64_t weights = 0, converted = 0;
  uint64_t bytes = 0;
  for (const auto& ti : f->tensors()) {
    int64_t n = ti.ne[0] * ti.ne[1] * ti.ne[2] * ti.ne[3];
    weights += n;
    if (ti.dtype() != DType::f32) {
      converted += n;
      bytes += ti.nbytes;
    }
  }
  EXPECT_EQ(s.weights, weights);
  EXPECT_EQ(s.converted_weights, converted);
  EXPECT_EQ(s.converted_bytes, bytes);
}

TEST(QuantizeFile, ThreadsAndBatchesDoNotChangeAByte) {
  TempDir t("threads");
  ModelSpec spec;
  spec.n_layer = 1;
  // token_embd and output of 17,000 rows of 256: more than one batch of rows.
  spec.n_vocab = weft::test::kSanitized ? 4500 : 17000;
  spec.big_row = 30000;  // one row through the overflow check
  const std::string in = t / "in.gguf";
  write_model(in, spec);
  std::string first;
  for (int threads : {1, 2, 3}) {
    const std::string out = t / ("out" + std::to_string(threads) + ".gguf");
    weft::model::quantize_file(in, out, options(QuantMix::Q4_K_M, threads));
    const std::string bytes = read_bytes(out);
    if (first.empty()) {
      first = bytes;
      check_output(in, out, QuantMix::Q4_K_M);
    } else {
      EXPECT_TRUE(bytes == first) << threads << " threads";
    }
  }
}

TEST(QuantizeFile, RequantizingNeedsPermission) {
  TempDir t("requantize");
  const std::string in = t / "demo.gguf", out = t / "out.gguf";
  weft::model::write_demo_model(in, weft::model::tiny_demo_spec());  // q8_0 matrices, rows of 64
  try {
    weft::model::quantize_file(in, out, options(QuantMix::Q4_K_M));
    ADD_FAILURE() << "no error";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::invalid_input);
    EXPECT_NE(std::string(e.what()).find("'blk.0.attn_q.weight' is q8_0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--allow-requantize"), std::string::npos) << e.what();
  }
  EXPECT_EQ(t.files(), std::vector<std::string>{"demo.gguf"});
  // Q8_0 changes no type: nothing to requantize, every tensor copied.
  weft::model::quantize_file(in, out, options(QuantMix::Q8_0));
  check_output(in, out, QuantMix::Q8_0);
  QuantizeOptions o = options(QuantMix::Q4_K_M);
  o.allow_requantize = true;
  weft::model::quantize_file(in, out, o);
  check_output(in, out, QuantMix::Q4_K_M);
  auto f = GgufFile::open(out);
  EXPECT_EQ(f->find_tensor("token_embd.weight")->dtype(), DType::q8_0);  // tied, rows of 64: the output rule
  EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight")->dtype(), DType::q5_0);  // q4_K does not fit 64
  EXPECT_EQ(f->find_tensor("blk.1.attn_v.weight")->dtype(), DType::q8_0);  // q6_K does not either
}

TEST(QuantizeFile, ErrorsLeaveNoFileBehind) {
  TempDir t("errors");
  const std::string in = t / "in.gguf", out = t / "out.gguf";
  {
    std::ofstream old(out);
    old << "an older file";
  }
  auto expect_error = [&](const std::string& input, QuantMix mix, weft::ErrorKind kind, const std::string& part) {
    try {
      weft::model::quantize_file(input, out, options(mix));
      ADD_FAILURE() << "no error for " << part;
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
    EXPECT_EQ(read_bytes(out), "an older file");
  };
  // A NaN in the last tensor: found while writing, after every other tensor.
  ModelSpec nan;
  nan.nan_last = true;
  write_model(in, nan);
  expect_error(in, QuantMix::Q4_K_M, weft::ErrorKind::invalid_input, "tensor 'output.weight' row 299 column 251 holds NaN");
  // Rows of 352 fit no q4_0 without a fallback... they do (352 = 11 * 32); rows of 100 do not.
  ModelSpec odd;
  odd.n_ff = 100;
  write_model(in, odd);
  expect_error(in, QuantMix::Q4_0, weft::ErrorKind::invalid_input, "tensor 'blk.0.ffn_down.weight'");
  ModelSpec other;
  other.arch = "gpt2";
  write_model(in, other);
  expect_error(in, QuantMix::Q4_0, weft::ErrorKind::unsupported, "gpt2");
  expect_error(t / "missing.gguf", QuantMix::Q4_0, weft::ErrorKind::invalid_input, "missing.gguf");
  EXPECT_EQ(t.files(), (std::vector<std::string>{"in.gguf", "out.gguf"}));
  // Into a folder that does not exist: refused, nothing created.
  try {
    weft::model::quantize_file(t / "in.gguf", t / "no/such/out.gguf", options(QuantMix::F16));
    ADD_FAILURE() << "no error";
  } catch (const weft::Error&) {
  }
  // An unsupported architecture is in the file above; write a good one and
  // check the success path replaces the old file.
  write_model(in, {});
  weft::model::quantize_file(in, out, options(QuantMix::Q8_0));
  check_output(in, out, QuantMix::Q8_0);
  EXPECT_EQ(t.files(), (std::vector<std::string>{"in.gguf", "out.gguf"}));
}

TEST(QuantizeFile, CancelStopsAndRemovesTheTemporaryFile) {
  TempDir t("cancel");
  const std::string in = t / "in.gguf", out = t / "out.gguf";
  write_model(in, {});
  std::atomic<bool> cancel{false};
  QuantizeOptions o = options(QuantMix::Q4_K_M);
  o.cancel = &cancel;
  int calls = 0;
  std::vector<std::string> seen_during;
  o.progress = [&](int64_t done, int64_t total, const std::string& tensor) {
    EXPECT_LE(done, total);
    if (++calls == 3) {
      seen_during = t.files();  // the temporary file exists while writing
      cancel = true;
    }
  };
  try {
    weft::model::quantize_file(in, out, o);
    ADD_FAILURE() << "not cancelled";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.kind(), weft::ErrorKind::disconnected);
    EXPECT_NE(std::string(e.what()).find("cancelled"), std::string::npos) << e.what();
  }
  ASSERT_EQ(seen_during.size(), 2u);
  EXPECT_EQ(seen_during[1].rfind("out.gguf.tmp-", 0), 0u) << seen_during[1];
  EXPECT_EQ(t.files(), std::vector<std::string>{"in.gguf"});
}

TEST(QuantizeFile, WriterProducersStreamExactlyTheTensorBytes) {
  TempDir t("producer");
  const int64_t ne[2] = {64, 3};
  std::vector<float> v(192);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.25f;
  // The same bytes in pieces as in one block.
  GgufWriter a, b;
  a.add_tensor("x", DType::f32, ne, v.data());
  b.add_tensor("x", DType::f32, ne, [&](const GgufWriter::TensorSink& sink) {
    for (int r = 0; r < 3; ++r) sink(v.data() + r * 64, 64 * sizeof(float));
  });
  a.write(t / "a.gguf");
  b.write(t / "b.gguf");
  EXPECT_EQ(read_bytes(t / "a.gguf"), read_bytes(t / "b.gguf"));
  // Too few bytes, too many, or a throw: an error and no file.
  auto fails = [&](GgufWriter::TensorProducer p, weft::ErrorKind kind) {
    GgufWriter w;
    w.add_tensor("x", DType::f32, ne, std::move(p));
    try {
      w.write(t / "c.gguf");
      ADD_FAILURE() << "no error";
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
    }
    EXPECT_EQ(t.files(), (std::vector<std::string>{"a.gguf", "b.gguf"}));
  };
  fails([&](const GgufWriter::TensorSink& sink) { sink(v.data(), 100); }, weft::ErrorKind::internal);
  fails([&](const GgufWriter::TensorSink& sink) { sink(v.data(), 768); sink(v.data(), 1); }, weft::ErrorKind::internal);
  fails([&](const GgufWriter::TensorSink&) { weft::fail(weft::ErrorKind::invalid_input, "test", "stop"); },
        weft::ErrorKind::invalid_input);
}

}  // namespace
