// Split GGUF models: a set laid out as llama-gguf-split lays one out, written
// by an independent Python script (make_split_gguf.py), opens as one file;
// GgufWriter::write_split produces that layout (names, key order and types,
// the tool's cut rule); sets that do not hold together are refused naming the
// file at fault.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"

namespace fs = std::filesystem;
using namespace weft;

namespace {

using weft::test::TempDir;

// Opening must fail with invalid_input and a message containing every needle.
void expect_refused(const std::string& path, const std::vector<std::string>& needles) {
  try {
    GgufFile::open(path);
    ADD_FAILURE() << "opened " << path;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_input) << e.what();
    for (const std::string& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << n << " in: " << e.what();
  }
}

std::vector<uint8_t> bytes_of(const GgufFile& f, const GgufTensorInfo& t) {
  const auto* p = static_cast<const uint8_t*>(f.tensor_data(t));
  return {p, p + t.nbytes};
}

TEST(GgufSplit, NamesAsTheStandardTool) {
  EXPECT_EQ(gguf_split_path("dir/m", 0, 3), "dir/m-00001-of-00003.gguf");
  EXPECT_EQ(gguf_split_path("m", 11, 12), "m-00012-of-00012.gguf");
  EXPECT_EQ(gguf_split_path("m", 99999, 100000), "m-100000-of-100000.gguf");
  EXPECT_EQ(gguf_split_prefix("dir/m-00002-of-00003.gguf", 1, 3), "dir/m");
  EXPECT_EQ(gguf_split_prefix("dir/m-00002-of-00003.gguf", 0, 3), std::nullopt);
  EXPECT_EQ(gguf_split_prefix("dir/m-00002-of-00004.gguf", 1, 3), std::nullopt);
  EXPECT_EQ(gguf_split_prefix("-00001-of-00003.gguf", 0, 3), std::nullopt);  // no prefix
  EXPECT_EQ(gguf_split_prefix("m.gguf", 0, 1), std::nullopt);
}

// make_split_gguf.py's set against make_gguf.py's single file with the same
// metadata and tensors.
TEST(GgufSplit, ReadsIndependentPythonSplitSet) {
  // The interpreter CMake found once (WEFT_PYTHON3), not PATH's python3.
  TempDir dir;
  const std::string dir_py = WEFT_SOURCE_DIR "/tests/gguf/";
  const std::string single = dir.file("one.gguf"), prefix = dir.file("py");
  const std::string python = WEFT_PYTHON3;
  const std::string make_one = python + " '" + dir_py + "make_gguf.py' '" + single + "'";
  const std::string make_set = python + " '" + dir_py + "make_split_gguf.py' '" + prefix + "'";
  ASSERT_EQ(std::system(make_one.c_str()), 0) << make_one;
  ASSERT_EQ(std::system(make_set.c_str()), 0) << make_set;
  auto one = GgufFile::open(single);
  auto set = GgufFile::open(prefix + "-00001-of-00003.gguf");

  std::vector<std::string> keys = one->keys();
  for (const char* k : {"split.no", "split.count", "split.tensors.count"}) keys.push_back(k);
  EXPECT_EQ(set->keys(), keys);  // the first part's metadata
  EXPECT_EQ(set->get_string("general.architecture"), "llama");
  EXPECT_EQ(set->alignment(), 64u);

  ASSERT_EQ(set->parts().size(), 3u);
  const uint32_t aligns[3] = {64, 32, 32};
  const size_t counts[3] = {2, 1, 1};
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(set->parts()[i].path, gguf_split_path(prefix, i, 3));
    EXPECT_EQ(set->parts()[i].alignment, aligns[i]);
    EXPECT_EQ(set->parts()[i].n_tensors, counts[i]);
    EXPECT_EQ(set->parts()[i].size, fs::file_size(set->parts()[i].path));
  }
  ASSERT_EQ(set->tensors().size(), one->tensors().size());
  const uint32_t part_of[4] = {0, 0, 1, 2};
  for (size_t i = 0; i < one->tensors().size(); ++i) {
    const GgufTensorInfo& a = one->tensors()[i];
    const GgufTensorInfo& b = set->tensors()[i];
    EXPECT_EQ(b.name, a.name);
    EXPECT_EQ(b.part, part_of[i]) << b.name;
    EXPECT_EQ(b.type, a.type);
    EXPECT_EQ(std::vector<int64_t>(b.ne, b.ne + 4), std::vector<int64_t>(a.ne, a.ne + 4));
    EXPECT_EQ(bytes_of(*set, b), bytes_of(*one, a)) << b.name;
    EXPECT_EQ(set->find_tensor(a.name), &b);
  }

  // The mappings outlive the file through mapping(), every part's.
  const GgufTensorInfo* last = set->find_tensor("d.i32");
  const auto* p = static_cast<const int32_t*>(set->tensor_data(*last));
  std::shared_ptr<const void> keep = set->mapping();
  set.reset();
  EXPECT_EQ(p[4], 4 * 7 - 10);  // make_gguf.py's d.i32: i * 7 - 10
}

// A writer with 5 f32 tensors of 32, 64, 160, 96 and 32 bytes.
struct SplitModel {
  std::vector<std::vector<float>> data;
  GgufWriter w;
  SplitModel() {
    w.set_string("general.architecture", "llama");
    w.set_u32("llama.block_count", 2);
    w.set_u16("split.count", 9);  // a stale split key: replaced, not copied
    const int64_t sizes[5] = {8, 16, 40, 24, 8};
    for (int i = 0; i < 5; ++i) {
      data.emplace_back(static_cast<size_t>(sizes[i]));
      for (size_t j = 0; j < data.back().size(); ++j) data.back()[j] = static_cast<float>(i * 100 + j);
      const int64_t ne[1] = {sizes[i]};
      w.add_tensor("t" + std::to_string(i), DType::f32, ne, data.back().data());
    }
  }
};

// The standard tool's layout: every part a GGUF of its own, metadata in the
// first, then split.no u16, split.count u16, split.tensors.count i32 in each.
void expect_standard_layout(const std::vector<std::string>& paths, const std::vector<std::vector<std::string>>& names) {
  ASSERT_EQ(paths.size(), names.size());
  const uint32_t n = static_cast<uint32_t>(paths.size());
  for (uint32_t i = 0; i < n; ++i) {
    SCOPED_TRACE(paths[i]);
    auto part = GgufFile::open_part(paths[i]);
    std::vector<std::string> keys;
    if (i == 0) keys = {"general.architecture", "llama.block_count"};
    for (const char* k : {"split.no", "split.count", "split.tensors.count"}) keys.push_back(k);
    EXPECT_EQ(part->keys(), keys);
    EXPECT_EQ(part->find("split.no")->type, GgufType::u16);
    EXPECT_EQ(part->find("split.no")->u, i);
    EXPECT_EQ(part->find("split.count")->type, GgufType::u16);
    EXPECT_EQ(part->find("split.count")->u, n);
    EXPECT_EQ(part->find("split.tensors.count")->type, GgufType::i32);
    EXPECT_EQ(part->find("split.tensors.count")->i, 5);
    std::vector<std::string> got;
    for (const GgufTensorInfo& t : part->tensors()) got.push_back(t.name);
    EXPECT_EQ(got, names[i]);
  }
}

TEST(GgufSplit, WriterCutsAsTheStandardTool) {
  TempDir dir;
  SplitModel m;
  const std::string prefix = dir.file("m");
  // --split-max-tensors 2: a new part at tensors 2 and 4.
  std::vector<std::string> paths = m.w.write_split(prefix, GgufSplitLimits{0, 2});
  EXPECT_EQ(paths, (std::vector<std::string>{prefix + "-00001-of-00003.gguf", prefix + "-00002-of-00003.gguf",
                                             prefix + "-00003-of-00003.gguf"}));
  expect_standard_layout(paths, {{"t0", "t1"}, {"t2", "t3"}, {"t4"}});

  // --split-max-size 128 bytes (tensor bytes padded to 32): 32+64; 160 alone
  // (over the limit, a part of its own); 96+32 = 128, not over.
  for (const std::string& p : paths) fs::remove(p);
  paths = m.w.write_split(prefix, GgufSplitLimits{128, 0});
  expect_standard_layout(paths, {{"t0", "t1"}, {"t2"}, {"t3", "t4"}});

  // Read back as one: every tensor's values.
  auto f = GgufFile::open(paths.front());
  ASSERT_EQ(f->tensors().size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    const GgufTensorInfo& t = f->tensors()[i];
    EXPECT_EQ(t.name, "t" + std::to_string(i));
    ASSERT_EQ(t.nbytes, m.data[i].size() * sizeof(float));
    EXPECT_EQ(std::memcmp(f->tensor_data(t), m.data[i].data(), t.nbytes), 0) << t.name;
  }
  EXPECT_EQ(f->get_u32("split.count"), 3u);

  // No limit reached: one part, still with its split keys (as the tool writes
  // a set of one); it opens as a plain file.
  paths = m.w.write_split(dir.file("whole"), GgufSplitLimits{1 << 20, 0});
  expect_standard_layout(paths, {{"t0", "t1", "t2", "t3", "t4"}});
  EXPECT_EQ(paths.front(), dir.file("whole") + "-00001-of-00001.gguf");
  EXPECT_EQ(GgufFile::open(paths.front())->parts().size(), 1u);
}

// A hand-made part: its split keys as given, tensors named in names (one f32
// element each, the value v).
void write_part(const std::string& path, int no, int count, int total, const std::vector<std::string>& names,
                GgufType count_type = GgufType::u16) {
  static const float v = 1.5f;
  GgufWriter w;
  if (no == 0) w.set_string("general.architecture", "llama");
  w.set_u16("split.no", static_cast<uint16_t>(no));
  if (count_type == GgufType::u16) w.set_u16("split.count", static_cast<uint16_t>(count));
  else w.set_u32("split.count", static_cast<uint32_t>(count));
  w.set_i32("split.tensors.count", total);
  const int64_t ne[1] = {1};
  for (const std::string& n : names) w.add_tensor(n, DType::f32, ne, &v);
  w.write(path);
}

struct HandSet {
  TempDir dir;
  std::string prefix = dir.file("h");
  std::string part(int no, int count = 3) const { return gguf_split_path(prefix, static_cast<uint32_t>(no), static_cast<uint32_t>(count)); }
  HandSet() {
    write_part(part(0), 0, 3, 4, {"a", "b"});
    write_part(part(1), 1, 3, 4, {"c"});
    write_part(part(2), 2, 3, 4, {"d"});
  }
};

TEST(GgufSplit, HandMadeSetOpens) {
  HandSet s;
  auto f = GgufFile::open(s.part(0));
  ASSERT_EQ(f->tensors().size(), 4u);
  EXPECT_EQ(f->find_tensor("d")->part, 2u);
  EXPECT_EQ(*static_cast<const float*>(f->tensor_data(*f->find_tensor("d"))), 1.5f);
}

TEST(GgufSplit, RefusesAMissingPart) {
  HandSet s;
  fs::remove(s.part(1));
  expect_refused(s.part(0), {s.part(1), "part 2 of 3", "is missing"});
  // A FIFO in its place is refused before open(), which would block on it.
  ASSERT_EQ(::mkfifo(s.part(1).c_str(), 0600), 0);
  expect_refused(s.part(0), {s.part(1), "is not a regular file"});
}

TEST(GgufSplit, RefusesANonFirstPartNamingTheFirst) {
  HandSet s;
  expect_refused(s.part(1), {s.part(1), "part 2 of 3", "open " + s.part(0) + " instead"});
  expect_refused(s.part(2), {"open " + s.part(0) + " instead"});
  // Renamed away from the standard name: still refused, told to find part 1.
  fs::copy_file(s.part(2), s.dir.file("renamed.gguf"));
  expect_refused(s.dir.file("renamed.gguf"), {"part 3 of 3", "its first part (split.no 0)"});
}

TEST(GgufSplit, RefusesAFirstPartWithoutItsStandardName) {
  HandSet s;
  fs::copy_file(s.part(0), s.dir.file("model.gguf"));
  expect_refused(s.dir.file("model.gguf"), {"model.gguf", "-00001-of-00003.gguf", "cannot be found"});
}

TEST(GgufSplit, RefusesAPartOfAnotherModel) {
  {
    HandSet s;  // another set's split.count
    write_part(s.part(2), 2, 4, 4, {"d"});
    expect_refused(s.part(0), {s.part(2), "split.count 4 differs from 3"});
  }
  {
    HandSet s;  // another set's total
    write_part(s.part(1), 1, 3, 5, {"c"});
    expect_refused(s.part(0), {s.part(1), "split.tensors.count 5 differs from 4"});
  }
  {
    HandSet s;  // more tensors than the total
    write_part(s.part(2), 2, 3, 4, {"d", "e"});
    expect_refused(s.part(0), {s.part(2), "its 2 tensors bring the set past split.tensors.count 4"});
  }
  {
    HandSet s;  // fewer
    write_part(s.part(2), 2, 3, 4, {});
    expect_refused(s.part(0), {s.part(0), "hold 3 tensors but split.tensors.count is 4"});
  }
  {
    HandSet s;  // a plain file in a part's place
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    w.write(s.part(1));
    expect_refused(s.part(0), {s.part(1), "has no split.count"});
  }
}

TEST(GgufSplit, RefusesATensorInTwoParts) {
  HandSet s;
  write_part(s.part(2), 2, 3, 4, {"b"});  // also in part 1
  expect_refused(s.part(0), {s.part(2), "tensor 'b' is also in " + s.part(0)});
}

TEST(GgufSplit, RefusesAWrongSplitNo) {
  HandSet s;
  write_part(s.part(2), 1, 3, 4, {"d"});  // says it is part 2
  expect_refused(s.part(0), {s.part(2), "split.no 1", "part 3 of 3"});
}

TEST(GgufSplit, RefusesSplitKeysOfTheWrongTypeOrValue) {
  {
    HandSet s;
    write_part(s.part(1), 1, 3, 4, {"c"}, GgufType::u32);
    expect_refused(s.part(0), {s.part(1), "split.count has type u32, expected u16"});
  }
  {
    TempDir dir;
    write_part(dir.file("z-00001-of-00000.gguf"), 0, 0, 0, {});
    expect_refused(dir.file("z-00001-of-00000.gguf"), {"split.count is 0"});
    write_part(dir.file("n.gguf"), 3, 2, 0, {});
    expect_refused(dir.file("n.gguf"), {"split.no 3 is not below split.count 2"});
    write_part(dir.file("t-00001-of-00001.gguf"), 0, 1, -1, {});
    expect_refused(dir.file("t-00001-of-00001.gguf"), {"split.tensors.count -1"});
    write_part(dir.file("u-00001-of-00001.gguf"), 0, 1, 2, {"a"});
    expect_refused(dir.file("u-00001-of-00001.gguf"), {"holds 1 tensors but split.tensors.count is 2"});
  }
}

// A part that is itself malformed is refused by the single-file reader,
// naming that part.
TEST(GgufSplit, RefusesACorruptPart) {
  HandSet s;
  fs::resize_file(s.part(2), fs::file_size(s.part(2)) - 2);
  expect_refused(s.part(0), {"h-00003-of-00003.gguf", "runs past the end"});
}

}  // namespace
