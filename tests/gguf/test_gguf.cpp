// GGUF v3: writer -> reader round trips, every truncation and a list of
// corruptions refused with errors naming the field, a file written by an
// independent Python script (make_gguf.py) read back value by value, and
// metadata memory bounded by the file size and the metadata cap.
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "sanitized.h"
#include "temp_dir.h"
#include "weft/core/dtype.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"

namespace fs = std::filesystem;
using namespace weft;

namespace {

using weft::test::TempDir;

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_all(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Opening must fail with invalid_input and a message containing `needle`.
void expect_invalid(const std::string& path, const std::string& needle) {
  try {
    GgufFile::open(path);
    ADD_FAILURE() << "opened a corrupt file; expected an error containing: " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_input) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[gguf]"), std::string::npos) << e.what();
  }
}

// Little-endian byte builder for hand-made files.
struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  Bytes& put(T v) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
    return *this;
  }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& str(const std::string& s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  Bytes& pad(size_t align = 32) {
    while (b.size() % align) b.push_back(0);
    return *this;
  }
  Bytes& zeros(size_t n) {
    b.insert(b.end(), n, 0);
    return *this;
  }
  // Tensor info: name, dims, dtype id, offset.
  Bytes& info(const std::string& name, std::vector<uint64_t> dims, uint32_t dtype, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(dtype).u64(offset);
  }
};

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& x : v) x = static_cast<uint8_t>(rng());
  return v;
}

}  // namespace

TEST(Gguf, RoundTripEveryValueTypeAndDType) {
  TempDir dir;
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("u32", 4000000000u);
  w.set_i32("i32", -7);
  w.set_u64("u64", 1ull << 50);
  w.set_f32("f32", 0.25f);
  w.set_bool("bool", true);
  w.set_array("strings", std::vector<std::string>{"a", "", "ünï"});
  w.set_array("floats", std::vector<float>{1.f, -2.5f});
  w.set_array("ints", std::vector<int32_t>{-3, 4, 5});
  GgufValue v;
  v.type = GgufType::u8, v.u = 255, w.set_value("u8", v);
  v.type = GgufType::u16, v.u = 65535, w.set_value("u16", v);
  v = GgufValue{};
  v.type = GgufType::i8, v.i = -128, w.set_value("i8", v);
  v.type = GgufType::i16, v.i = -32768, w.set_value("i16", v);
  v.type = GgufType::i64, v.i = -(1ll << 60), w.set_value("i64", v);
  v.type = GgufType::f64, v.f = 1e300, w.set_value("f64", v);
  GgufValue nested;  // array of arrays of u16
  nested.type = GgufType::array, nested.arr = GgufArray(GgufType::array);
  for (int i = 0; i < 2; ++i) {
    GgufValue inner;
    inner.type = GgufType::array, inner.arr = GgufArray(GgufType::u16);
    for (int j = 0; j <= i; ++j) {
      GgufValue e;
      e.type = GgufType::u16, e.u = static_cast<uint64_t>(10 * i + j);
      inner.arr.push(e);
    }
    nested.arr.push(inner);
  }
  w.set_value("nested", nested);
  w.set_u32("u32", 17);  // replaces, keeps its place

  struct Spec {
    const char* name;
    DType type;
    std::vector<int64_t> ne;
  };
  const std::vector<Spec> specs = {
      {"t.f32", DType::f32, {3, 5}},       {"t.f16", DType::f16, {7}},          {"t.bf16", DType::bf16, {2, 3, 4}},
      {"t.i32", DType::i32, {1, 1, 1, 9}}, {"t.q8_0", DType::q8_0, {64, 3}}, {"t.q4_0", DType::q4_0, {32, 2, 2}},
      {"t.empty", DType::f32, {0, 4}},
  };
  std::vector<std::vector<uint8_t>> data;
  for (size_t i = 0; i < specs.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : specs[i].ne) n *= d;
    data.push_back(random_bytes(row_bytes(specs[i].type, n), static_cast<uint32_t>(i)));
    w.add_tensor(specs[i].name, specs[i].type, specs[i].ne, data.back().data());
  }
  const std::string path = dir.file("rt.gguf");
  w.write(path);
  for (const auto& e : fs::directory_iterator(dir.path)) EXPECT_EQ(e.path().filename(), "rt.gguf");

  auto f = GgufFile::open(path);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->data_offset() % 32, 0u);
  EXPECT_EQ(f->keys().front(), "general.architecture");
  EXPECT_EQ(f->keys()[1], "u32");
  EXPECT_EQ(f->keys().size(), 16u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_u32("u32"), 17u);
  EXPECT_EQ(f->get_i64("i32"), -7);
  EXPECT_EQ(f->get_i64("u64"), int64_t(1ll << 50));
  EXPECT_EQ(f->get_f32("f32"), 0.25f);
  EXPECT_EQ(f->get_bool("bool"), true);
  EXPECT_EQ(f->get_array_strings("strings"), (std::vector<std::string>{"a", "", "ünï"}));
  EXPECT_EQ(f->get_array_f32("floats"), (std::vector<float>{1.f, -2.5f}));
  EXPECT_EQ(f->get_array_i32("ints"), (std::vector<int32_t>{-3, 4, 5}));
  EXPECT_EQ(f->get_u32("u8"), 255u);
  EXPECT_EQ(f->get_u32("u16"), 65535u);
  EXPECT_EQ(f->get_i64("i8"), -128);
  EXPECT_EQ(f->get_i64("i16"), -32768);
  EXPECT_EQ(f->get_i64("i64"), -(1ll << 60));
  EXPECT_EQ(f->find("f64")->f, 1e300);
  EXPECT_EQ(f->find("f64")->type, GgufType::f64);
  const GgufValue* n = f->find("nested");
  ASSERT_NE(n, nullptr);
  ASSERT_EQ(n->arr.size(), 2u);
  EXPECT_EQ(n->arr.elem_type(), GgufType::array);
  EXPECT_EQ(n->arr.element(1).arr.elem_type(), GgufType::u16);
  EXPECT_EQ(n->arr.element(1).arr.element(1).u, 11u);
  EXPECT_FALSE(f->has("missing"));
  EXPECT_EQ(f->get_u32("missing"), std::nullopt);

  // Type mismatches name the key.
  auto expect_mismatch = [&](auto&& call, const std::string& key) {
    try {
      call();
      ADD_FAILURE() << key;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_input);
      EXPECT_NE(std::string(e.what()).find("'" + key + "'"), std::string::npos) << e.what();
    }
  };
  expect_mismatch([&] { f->get_u32("i32"); }, "i32");  // negative
  expect_mismatch([&] { f->get_u32("u64"); }, "u64");  // too large
  expect_mismatch([&] { f->get_string("u32"); }, "u32");
  expect_mismatch([&] { f->get_bool("u8"); }, "u8");
  expect_mismatch([&] { f->get_f32("strings"); }, "strings");
  expect_mismatch([&] { f->get_array_f32("ints"); }, "ints");
  expect_mismatch([&] { f->get_array_strings("floats"); }, "floats");

  ASSERT_EQ(f->tensors().size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const GgufTensorInfo& t = f->tensors()[i];
    EXPECT_EQ(t.name, specs[i].name);
    EXPECT_TRUE(t.supported);
    EXPECT_EQ(t.dtype(), specs[i].type);
    EXPECT_EQ(t.n_dims, static_cast<int>(specs[i].ne.size()));
    for (int d = 0; d < 4; ++d)
      EXPECT_EQ(t.ne[d], d < t.n_dims ? specs[i].ne[d] : 1) << t.name << " dim " << d;
    EXPECT_EQ(t.offset % 32, 0u);
    ASSERT_EQ(t.nbytes, data[i].size()) << t.name;
    if (t.nbytes) {
      EXPECT_EQ(std::memcmp(f->tensor_data(t), data[i].data(), t.nbytes), 0) << t.name;
    }
  }
  EXPECT_EQ(f->find_tensor("t.q8_0"), &f->tensors()[4]);
}

TEST(Gguf, WriterHonoursAlignmentAndRefusesBadTensors) {
  TempDir dir;
  GgufWriter w;
  w.set_u32("general.alignment", 128);
  std::vector<uint8_t> a(12, 1), b(8, 2);
  const int64_t ne_a[] = {3}, ne_b[] = {2};
  w.add_tensor("a", DType::f32, ne_a, a.data());
  w.add_tensor("b", DType::f32, ne_b, b.data());
  w.write(dir.file("x.gguf"));
  auto f = GgufFile::open(dir.file("x.gguf"));
  EXPECT_EQ(f->alignment(), 128u);
  EXPECT_EQ(f->data_offset() % 128, 0u);
  EXPECT_EQ(f->tensors()[1].offset, 128u);
  EXPECT_EQ(std::memcmp(f->tensor_data(f->tensors()[1]), b.data(), 8), 0);

  const int64_t ne_q[] = {31};
  EXPECT_THROW(w.add_tensor("q", DType::q8_0, ne_q, a.data()), Error);
  EXPECT_THROW(w.add_tensor("a", DType::f32, ne_a, a.data()), Error);
  const int64_t ne5[] = {1, 1, 1, 1, 1};
  EXPECT_THROW(w.add_tensor("five", DType::f32, ne5, a.data()), Error);
  w.set_u32("general.alignment", 48);
  EXPECT_THROW(w.write(dir.file("y.gguf")), Error);
  EXPECT_FALSE(fs::exists(dir.file("y.gguf")));
}

TEST(Gguf, EveryTruncationIsRefused) {
  TempDir dir;
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("general.alignment", 8);
  w.set_array("tok", std::vector<std::string>{"x", "yz"});
  w.set_array("sc", std::vector<float>{0.5f});
  w.set_bool("b", false);
  std::vector<uint8_t> d1 = random_bytes(34, 1), d2 = random_bytes(8, 2);
  const int64_t ne1[] = {32}, ne2[] = {2};
  w.add_tensor("blk.0.q", DType::q8_0, ne1, d1.data());
  w.add_tensor("blk.0.n", DType::f32, ne2, d2.data());
  const std::string full = dir.file("full.gguf"), cut = dir.file("cut.gguf");
  w.write(full);
  std::vector<uint8_t> bytes = read_all(full);
  ASSERT_NO_THROW(GgufFile::open(full));
  for (size_t n = 0; n < bytes.size(); ++n) {
    write_all(cut, std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n)));
    try {
      GgufFile::open(cut);
      ADD_FAILURE() << "a file cut to " << n << " of " << bytes.size() << " bytes opened";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_input) << n << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("cut.gguf"), std::string::npos) << e.what();
    }
  }
}

TEST(Gguf, RandomCorruptionNeverCrashes) {
  // Flipped bytes must give a file that opens or an Error, never a crash.
  TempDir dir;
  GgufWriter w;
  w.set_array("tok", std::vector<std::string>{"a", "bc", "def"});
  w.set_u32("n", 3);
  std::vector<uint8_t> d = random_bytes(16, 3);
  const int64_t ne[] = {4};
  w.add_tensor("t", DType::f32, ne, d.data());
  w.write(dir.file("ok.gguf"));
  const std::vector<uint8_t> bytes = read_all(dir.file("ok.gguf"));
  std::mt19937 rng(42);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<uint8_t> b = bytes;
    for (int k = 0; k < 3; ++k) b[rng() % b.size()] = static_cast<uint8_t>(rng());
    write_all(dir.file("bad.gguf"), b);
    try {
      auto f = GgufFile::open(dir.file("bad.gguf"));
      for (const GgufTensorInfo& t : f->tensors())
        if (t.supported) (void)static_cast<const uint8_t*>(f->tensor_data(t))[t.nbytes ? t.nbytes - 1 : 0];
    } catch (const Error&) {
    }
  }
}

TEST(Gguf, CorruptFieldsAreNamed) {
  TempDir dir;
  const std::string p = dir.file("model.gguf");
  auto check = [&](const Bytes& b, const std::string& needle) {
    write_all(p, b.b);
    expect_invalid(p, needle);
  };
  auto one_tensor = [](const std::string& name, std::vector<uint64_t> dims, uint32_t dtype, uint64_t offset,
                       size_t data) {
    Bytes b;
    b.header(1, 0).info(name, dims, dtype, offset).pad().zeros(data);
    return b;
  };
  // The baseline opens.
  write_all(p, one_tensor("w", {4, 2}, 0, 0, 32).b);
  ASSERT_NO_THROW(GgufFile::open(p));

  Bytes bad_magic;
  bad_magic.b = {'G', 'G', 'M', 'L', 3, 0, 0, 0};
  check(bad_magic, "magic");
  check(Bytes().header(0, 0, 2), "version 2");
  check(Bytes().header(2'000'000, 0), "tensor_count");
  check(Bytes().header(0, 2'000'000), "kv_count");
  check(Bytes().header(0, 1).u64(5'000'000).zeros(64), "exceeds the cap");                          // key length
  check(Bytes().header(0, 1).str("k").u32(8).u64(1ull << 62), "kv 0 'k'");                          // string length
  check(Bytes().header(0, 1).str("k").u32(13).u32(0), "unknown value type 13");                     // kv type
  check(Bytes().header(0, 1).str("k").u32(9).u32(77).u64(0), "unknown value type 77");              // array elem type
  check(Bytes().header(0, 1).str("k").u32(9).u32(4).u64(1ull << 40).zeros(8), "runs past the end");  // array count
  check(Bytes().header(0, 1).str("k").u32(9).u32(9).u64(1).u32(9).u64(1).u32(4).u64(0), "nested deeper");
  check(Bytes().header(0, 1).str("k").u32(7).put<uint8_t>(2), "bool value 2");
  check(Bytes().header(0, 2).str("k").u32(4).u32(1).str("k").u32(4).u32(1), "duplicate key");
  check(Bytes().header(0, 1).str("general.alignment").u32(4).u32(24), "not a power of two");
  check(Bytes().header(0, 1).str("general.alignment").u32(4).u32(0), "not a power of two");
  check(Bytes().header(0, 1).str("general.alignment").u32(10).u64(32), "expected u32");
  check(one_tensor("w", {1, 1, 1, 1, 1}, 0, 0, 32), "tensor 0 'w' n_dims");
  check(one_tensor("w", {}, 0, 0, 32), "tensor 0 'w' n_dims");
  check(one_tensor("w", {4, uint64_t(-1)}, 0, 0, 32), "dims[1]");                      // negative
  check(one_tensor("w", {1ull << 40, 1ull << 40}, 0, 0, 32), "overflows");              // product
  check(one_tensor("w", {33}, 8, 0, 64), "not a multiple of the dtype's block");
  // Every block type: a row that splits a block, and a tensor whose last
  // block is cut short by the end of the file, both named.
  for (int i = 0; i < kDTypeCount; ++i) {
    const DTypeTraits& tr = traits(static_cast<DType>(i));
    if (!tr.quantized) continue;
    const auto block = static_cast<uint64_t>(tr.block_size);
    SCOPED_TRACE(std::string(tr.name));
    check(one_tensor("blk.0.ffn_down.weight", {block + 16, 2}, tr.gguf_id, 0, 4096),
          "tensor 0 'blk.0.ffn_down.weight' dims[0]");
    check(one_tensor("blk.0.ffn_down.weight", {block, 2}, tr.gguf_id, 0, 2 * tr.unit_bytes - 1),
          "tensor 0 'blk.0.ffn_down.weight' data");
  }
  check(one_tensor("w", {4}, 0, 16, 64), "offset at byte 49: 16 is not a multiple of the alignment 32");
  check(one_tensor("blk.0.attn_q.weight", {4, 2}, 0, 32, 32), "tensor 0 'blk.0.attn_q.weight' data");
  check(one_tensor("w", {4, 2}, 0, 1ull << 62, 32), "runs past the end");
  check(one_tensor("w", {4, 2}, 0, 0, 31), "runs past the end of the file (size");
  check(one_tensor("w", {1ull << 31, 1ull << 30}, 0, 0, 32), "runs past the end");
  Bytes dup;
  dup.header(2, 0).info("w", {4}, 0, 0).info("w", {4}, 0, 32).pad().zeros(64);
  check(dup, "duplicate tensor name");
}

// gpt-oss stores its experts as 3-D mxfp4 tensors (GGUF type 39, 17-byte
// blocks of 32): one loads as DType::mxfp4 with its bytes in place, and
// decodes to the values it was quantized from (all exact mxfp4 values).
TEST(Gguf, Mxfp4ExpertTensorLoads) {
  TempDir dir;
  const std::string p = dir.file("mxfp4.gguf");
  constexpr int64_t kValues = 64 * 3 * 2;  // [64, 3 rows, 2 experts]
  std::vector<float> x(kValues);
  const float kLevels[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  // Block b: E2M1 values times 2^(b % 4 - 2), its largest magnitude 6 of them.
  for (int64_t i = 0; i < kValues; ++i) x[i] = kLevels[i % 8] * std::ldexp(i % 3 == 0 ? -1.0f : 1.0f, i / 32 % 4 - 2);
  for (int64_t b = 0; b < kValues / 32; ++b) x[32 * b + 5] = std::ldexp(-6.0f, static_cast<int>(b % 4) - 2);
  std::vector<uint8_t> data(kValues / 32 * 17);
  from_f32(DType::mxfp4, x.data(), data.data(), kValues);
  Bytes b;
  b.header(1, 0).info("blk.0.ffn_up_exps.weight", {64, 3, 2}, 39, 0).pad();
  b.b.insert(b.b.end(), data.begin(), data.end());
  write_all(p, b.b);
  auto f = GgufFile::open(p);
  const GgufTensorInfo& t = f->tensors()[0];
  ASSERT_TRUE(t.supported);
  EXPECT_EQ(t.dtype(), DType::mxfp4);
  EXPECT_EQ(t.ggml_type, 39u);
  EXPECT_EQ(t.n_dims, 3);
  EXPECT_EQ(t.nbytes, data.size());
  const auto* bytes = static_cast<const uint8_t*>(f->tensor_data(t));
  ASSERT_TRUE(std::equal(data.begin(), data.end(), bytes));
  std::vector<float> y(kValues);
  to_f32(DType::mxfp4, bytes, y.data(), kValues);
  EXPECT_EQ(y, x);
}

TEST(Gguf, UnsupportedDTypesOpenButRefuseData) {
  TempDir dir;
  const std::string p = dir.file("k.gguf");
  Bytes b;
  // iq2_xxs (16): a type weft reads the layout of but does not compute.
  b.header(2, 0).info("q4k", {256}, 16, 0).info("odd", {3}, 99, 160).pad().zeros(160);
  write_all(p, b.b);
  auto f = GgufFile::open(p);
  const GgufTensorInfo& q4k = f->tensors()[0];
  EXPECT_FALSE(q4k.supported);
  EXPECT_EQ(q4k.ggml_type, 16u);
  EXPECT_EQ(q4k.nbytes, 66u);
  EXPECT_EQ(f->tensors()[1].nbytes, 0u);
  try {
    f->tensor_data(q4k);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unsupported);
    EXPECT_NE(std::string(e.what()).find("unsupported dtype id 16"), std::string::npos) << e.what();
  }
  EXPECT_THROW(f->tensors()[1].dtype(), Error);
  // The layout of an unsupported type is still bounds-checked.
  Bytes short_k;
  short_k.header(1, 0).info("q4k", {256}, 12, 0).pad().zeros(143);
  write_all(p, short_k.b);
  expect_invalid(p, "runs past the end");
}

TEST(Gguf, ReadsIndependentPythonWriter) {
  // The interpreter CMake found once (WEFT_PYTHON3: Debian's, which the
  // project's setup installs), not whichever python3 is first on PATH.
  TempDir dir;
  const std::string out = dir.file("py.gguf");
  const std::string cmd =
      std::string(WEFT_PYTHON3) + " '" + WEFT_SOURCE_DIR + "/tests/gguf/make_gguf.py' '" + out + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto f = GgufFile::open(out);

  const std::vector<std::string> keys = {"general.architecture", "general.alignment", "test.u8", "test.i8",
                                         "test.u16", "test.i16", "test.u32", "test.i32", "test.f32", "test.bool",
                                         "test.u64", "test.i64", "test.f64", "tokenizer.ggml.tokens",
                                         "test.scores", "test.ids"};
  EXPECT_EQ(f->keys(), keys);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->find("test.u8")->type, GgufType::u8);
  EXPECT_EQ(f->get_u32("test.u8"), 200u);
  EXPECT_EQ(f->get_i64("test.i8"), -5);
  EXPECT_EQ(f->get_u32("test.u16"), 60000u);
  EXPECT_EQ(f->get_i64("test.i16"), -1234);
  EXPECT_EQ(f->get_u32("test.u32"), 4000000000u);
  EXPECT_EQ(f->get_i64("test.i32"), -123456);
  EXPECT_EQ(f->get_f32("test.f32"), 1.5f);
  EXPECT_EQ(f->get_bool("test.bool"), true);
  EXPECT_EQ(f->get_i64("test.u64"), (int64_t(1) << 40) + 3);
  EXPECT_EQ(f->get_i64("test.i64"), -(int64_t(1) << 40));
  EXPECT_EQ(f->find("test.f64")->type, GgufType::f64);
  EXPECT_EQ(f->find("test.f64")->f, 2.25);
  EXPECT_EQ(f->get_array_strings("tokenizer.ggml.tokens"), (std::vector<std::string>{"<s>", "hello", "w\xc3\xb6rld"}));
  EXPECT_EQ(f->get_array_f32("test.scores"), (std::vector<float>{0.f, -1.5f, 2.25f, 3.f}));
  EXPECT_EQ(f->get_array_i32("test.ids"), (std::vector<int32_t>{-1, 0, 7}));

  ASSERT_EQ(f->tensors().size(), 4u);
  const GgufTensorInfo* a = f->find_tensor("a.f32");
  const GgufTensorInfo* b = f->find_tensor("b.f16");
  const GgufTensorInfo* c = f->find_tensor("c.q8_0");
  const GgufTensorInfo* d = f->find_tensor("d.i32");
  ASSERT_TRUE(a && b && c && d);
  for (const GgufTensorInfo* t : {a, b, c, d}) EXPECT_EQ(t->offset % 64, 0u) << t->name;
  EXPECT_EQ(a->dtype(), DType::f32);
  EXPECT_EQ(a->n_dims, 2);
  EXPECT_EQ(a->ne[0], 4);
  EXPECT_EQ(a->ne[1], 3);
  EXPECT_EQ(a->nbytes, 48u);
  std::vector<float> v(64);
  to_f32(DType::f32, f->tensor_data(*a), v.data(), 12);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(v[i], i * 0.5f);

  EXPECT_EQ(b->dtype(), DType::f16);
  EXPECT_EQ(b->n_dims, 1);
  EXPECT_EQ(b->ne[0], 8);
  to_f32(DType::f16, f->tensor_data(*b), v.data(), 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(v[i], i * 0.25f - 1) << i;

  EXPECT_EQ(c->dtype(), DType::q8_0);
  EXPECT_EQ(c->n_dims, 2);
  EXPECT_EQ(c->ne[0], 64);
  EXPECT_EQ(c->ne[1], 1);
  EXPECT_EQ(c->nbytes, 68u);
  to_f32(DType::q8_0, f->tensor_data(*c), v.data(), 64);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(v[j], 0.5f * (j - 16)) << j;
    EXPECT_EQ(v[32 + j], 0.25f * (15 - j)) << j;
  }

  EXPECT_EQ(d->dtype(), DType::i32);
  EXPECT_EQ(d->ne[0], 5);
  const int32_t* iv = static_cast<const int32_t*>(f->tensor_data(*d));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(iv[i], i * 7 - 10);
}

namespace {

// Every value of an array as text, nested arrays in brackets: equal texts mean
// equal elements (floats printed exactly).
std::string array_text(const GgufArray& a) {
  std::string out = std::string(gguf_type_name(a.elem_type())) + "[";
  for (size_t i = 0; i < a.size(); ++i) {
    GgufValue e = a.element(i);
    EXPECT_EQ(e.type, a.elem_type());
    char buf[64];
    std::snprintf(buf, sizeof buf, "%llu|%lld|%a|", static_cast<unsigned long long>(e.u), static_cast<long long>(e.i), e.f);
    out += buf + (e.type == GgufType::array ? array_text(e.arr) : e.s) + ",";
  }
  return out + "]";
}

GgufValue array_value(GgufArray a) {
  GgufValue v;
  v.type = GgufType::array;
  v.arr = std::move(a);
  return v;
}

// Resident and peak resident bytes of this process (/proc/self/status).
size_t status_kb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1));
  return 0;
}

using test::kSanitized;  // RSS checks are skipped there: shadow memory counts as resident

}  // namespace

TEST(Gguf, EveryArrayTypeRoundTripsExactly) {
  TempDir dir;
  GgufWriter w;
  std::mt19937_64 rng(7);
  const GgufType fixed[] = {GgufType::u8,  GgufType::i8,  GgufType::u16, GgufType::i16,
                            GgufType::u32, GgufType::i32, GgufType::u64, GgufType::i64,
                            GgufType::f32, GgufType::f64, GgufType::boolean};
  std::vector<std::pair<std::string, std::string>> want;  // key, array_text
  for (GgufType t : fixed) {
    // Random bytes, but with bool bytes 0/1 and floats that are not NaN.
    GgufArray packed_bytes(t);
    GgufArray pushed(t);
    for (int k = 0; k < 40; ++k) {
      uint64_t bits = k < 2 ? (k ? ~0ull : 0ull) : rng();
      if (t == GgufType::boolean) bits &= 1;
      if (t == GgufType::f32) bits &= 0xbf7fffffu;
      if (t == GgufType::f64) bits &= 0xbfefffffffffffffull;
      GgufArray one = GgufArray::packed(t, &bits, 1);
      packed_bytes.push(one.element(0));
      pushed.push(one.element(0));
    }
    GgufArray inner_empty(t);
    GgufArray nested(GgufType::array);
    nested.push(array_value(pushed));
    nested.push(array_value(inner_empty));
    nested.push(array_value(packed_bytes));
    std::string name = gguf_type_name(t);
    want.emplace_back("a." + name, array_text(pushed));
    want.emplace_back("n." + name, array_text(nested));
    w.set_value("a." + name, array_value(pushed));
    w.set_value("n." + name, array_value(nested));
    EXPECT_EQ(array_text(packed_bytes), array_text(pushed));
  }
  const std::vector<std::string> strings = {"", "a", std::string("nul\0in", 6), "w\xc3\xb6rld", std::string(3000, 'x')};
  GgufArray s(GgufType::string), nested_s(GgufType::array);
  for (const std::string& x : strings) s.push(x);
  nested_s.push(array_value(s));
  nested_s.push(array_value(GgufArray(GgufType::string)));
  w.set_array("s", strings);
  w.set_value("n.string", array_value(nested_s));
  w.set_value("empty", array_value(GgufArray(GgufType::array)));
  want.emplace_back("s", array_text(s));
  want.emplace_back("n.string", array_text(nested_s));
  want.emplace_back("empty", "array[]");
  const std::string path = dir.file("arrays.gguf");
  w.write(path);

  auto f = GgufFile::open(path);
  for (const auto& [key, text] : want) {
    const GgufValue* v = f->find(key);
    ASSERT_NE(v, nullptr) << key;
    EXPECT_EQ(array_text(v->arr), text) << key;
  }
  EXPECT_EQ(f->get_array_strings("s"), strings);
  EXPECT_EQ(f->find("n.string")->arr.element(0).arr.string(2), strings[2]);
  EXPECT_EQ(f->find("a.u8")->arr.element(1).u, 255u);
  EXPECT_EQ(f->find("a.i64")->arr.element(1).i, -1);
  EXPECT_EQ(f->get_array_i32("a.i8")->at(1), -1);

  // Values viewing the file, written again after it closes: the same bytes.
  GgufWriter again;
  for (const std::string& key : f->keys()) again.set_value(key, *f->find(key));
  f.reset();
  again.write(dir.file("again.gguf"));
  EXPECT_EQ(read_all(dir.file("again.gguf")), read_all(path));

  // Misuse is refused.
  GgufArray u16(GgufType::u16), deep(GgufType::array);
  EXPECT_THROW(u16.push("text"), Error);
  EXPECT_THROW(u16.element(0), Error);
  EXPECT_THROW(deep.push(array_value(GgufArray(GgufType::array))), Error);
  const uint8_t two = 2;
  EXPECT_THROW(GgufArray::packed(GgufType::boolean, &two, 1), Error);
  EXPECT_THROW(GgufArray::packed(GgufType::string, &two, 1), Error);
}

TEST(Gguf, LargeArraysStayCompact) {
  // The report: a 16 MiB array<u8> took ~97 bytes of RAM per byte. Here
  // with a million short strings and 100k nested arrays beside it.
  TempDir dir;
  const std::string path = dir.file("big.gguf");
  const size_t n_blob = 16u << 20, n_strings = 1'000'000, n_nested = 100'000;
  {
    GgufWriter w;
    std::vector<uint8_t> blob = random_bytes(n_blob, 5);
    w.set_value("blob", array_value(GgufArray::packed(GgufType::u8, blob.data(), blob.size())));
    GgufArray strings(GgufType::string);
    for (size_t i = 0; i < n_strings; ++i) strings.push(std::string_view("abc", i % 4));
    w.set_value("strings", array_value(std::move(strings)));
    GgufArray nested(GgufType::array);
    for (size_t i = 0; i < n_nested; ++i) {
      const int32_t pair[2] = {static_cast<int32_t>(i), -static_cast<int32_t>(i)};
      nested.push(array_value(GgufArray::packed(GgufType::i32, pair, 2)));
    }
    w.set_value("nested", array_value(std::move(nested)));
    w.write(path);
  }
  const size_t file_bytes = fs::file_size(path);
#if defined(__GLIBC__)
  malloc_trim(0);  // the writer's freed memory must not hide the reader's
#endif
  // The peak resident growth around open(): heap plus touched file pages.
  const bool peak_reset = static_cast<bool>(std::ofstream("/proc/self/clear_refs") << "5");
  const size_t rss_before = status_kb("VmRSS") << 10;
  auto f = GgufFile::open(path);
  const size_t rss_peak = status_kb(peak_reset ? "VmHWM" : "VmRSS") << 10;

  const GgufArray& blob = f->find("blob")->arr;
  const GgufArray& strings = f->find("strings")->arr;
  const GgufArray& nested = f->find("nested")->arr;
  ASSERT_EQ(blob.size(), n_blob);
  ASSERT_EQ(strings.size(), n_strings);
  ASSERT_EQ(nested.size(), n_nested);
  EXPECT_EQ(strings.string(n_strings - 1), "abc");
  EXPECT_EQ(nested.element(n_nested - 1).arr.element(1).i, -static_cast<int64_t>(n_nested - 1));
  // Fixed-size elements cost nothing; others one offset each.
  EXPECT_EQ(blob.heap_bytes(), 0u);
  EXPECT_EQ(strings.heap_bytes(), n_strings * sizeof(uint64_t));
  EXPECT_LE(strings.heap_bytes(), strings.bytes().size());
  EXPECT_LE(nested.heap_bytes(), nested.bytes().size());
  EXPECT_LT(f->metadata_heap_bytes(), file_bytes / 2) << file_bytes;
  if (kSanitized) {
    std::printf("resident growth not checked under a sanitizer\n");
  } else {
    std::printf("open(): %zu MiB file, metadata heap %zu MiB, resident +%zu MiB (%s)\n", file_bytes >> 20,
                f->metadata_heap_bytes() >> 20, (rss_peak - std::min(rss_peak, rss_before)) >> 20,
                peak_reset ? "peak" : "after");
    EXPECT_LT(rss_peak - std::min(rss_peak, rss_before), 2 * file_bytes + (16u << 20))
        << "file " << file_bytes << " bytes, resident " << rss_before << " -> " << rss_peak
        << (peak_reset ? " (peak)" : " (now)");
  }
}

TEST(Gguf, MetadataOverTheCapIsRefused) {
  TempDir dir;
  const std::string p = dir.file("meta.gguf");
  auto expect_cap = [&](uint64_t cap, const std::string& key) {
    try {
      GgufFile::open(p, cap);
      ADD_FAILURE() << "opened metadata over a cap of " << cap;
    } catch (const Error& e) {
      std::string m = e.what();
      EXPECT_EQ(e.kind(), ErrorKind::invalid_input) << m;
      EXPECT_NE(m.find("meta.gguf: "), std::string::npos) << m;
      EXPECT_NE(m.find("'" + key + "'"), std::string::npos) << m;
      EXPECT_NE(m.find("over the cap of " + std::to_string(cap) + " bytes"), std::string::npos) << m;
    }
  };

  // The real cap, on a sparse file: one array<u8> a byte over it.
  Bytes big;
  big.header(0, 1).str("huge").u32(9).u32(0).u64(kGgufMaxMetadataBytes + 1);
  write_all(p, big.b);
  fs::resize_file(p, big.b.size() + kGgufMaxMetadataBytes + 1);
  expect_cap(kGgufMaxMetadataBytes, "huge");

  // Keys that sum past a lower cap: refused at the first key over it.
  GgufWriter w;
  std::vector<float> floats(250, 1.f);
  w.set_array("a", floats);
  w.set_array("b", floats);
  w.set_array("c", floats);
  w.write(p);
  const uint64_t section = fs::file_size(p) - 24;  // no tensors: the rest is metadata
  EXPECT_NO_THROW(GgufFile::open(p, section));
  expect_cap(section - 1, "c");
  expect_cap(section / 2, "b");

  // Strings longer than an array's count suggests: caught while walking.
  GgufWriter ws;
  ws.set_array("tokens", std::vector<std::string>(100, std::string(100, 't')));
  ws.write(p);
  expect_cap(2000, "tokens");
  EXPECT_NO_THROW(GgufFile::open(p, fs::file_size(p) - 24));
}
