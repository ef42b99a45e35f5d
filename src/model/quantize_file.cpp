// quantize_file: the GGUF rewrite of `weft quantize`. Plans every tensor's
// type first (so a refused input fails before anything is written), then
// streams the output through GgufWriter: the converted tensors' rows are
// produced by a RowPipeline (quantize_pipeline.h), worker threads converting
// a few batches ahead of the writing, so every core stays busy and memory
// stays at a few batches however large the model.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>

#include "quantize_pipeline.h"
#include "weft/core/error.h"
#include "weft/model/model.h"
#include "weft/model/quantize.h"

namespace weft::model {
namespace {

constexpr const char* kQuantizeFileWhere = "quantize";
constexpr int64_t kBatchValues = int64_t{1} << 20;  // input values converted per batch (of whole rows)
constexpr int64_t kGrainValues = 16384;              // values a thread claims at a time (whole rows)
constexpr size_t kCopyPiece = size_t{16} << 20;      // bytes of a copied tensor written between cancel checks
// Below this magnitude every type's f16 scales and mins are finite, so the
// result needs no check; rows reaching it are decoded again and checked.
constexpr float kScaleSafe = 16384.0f;

std::string tensor_label(const std::string& name) { return "tensor '" + name + "'"; }

int64_t elements(const GgufTensorInfo& t) {
  int64_t n = 1;
  for (int64_t d : t.ne) n *= d;
  return n;
}

// An integer key, or element 0 of a per-layer array of them.
std::optional<int64_t> int_or_first(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.find(key);
  if (v && v->type == GgufType::array) {
    if (v->arr.empty())
      fail(ErrorKind::invalid_input, kQuantizeFileWhere, f.path() + ": " + key + " is an empty array");
    const GgufValue e = v->arr.element(0);
    return e.type == GgufType::i8 || e.type == GgufType::i16 || e.type == GgufType::i32 || e.type == GgufType::i64
               ? e.i
               : static_cast<int64_t>(e.u);
  }
  return f.get_i64(key);
}

void check_cancel(const QuantizeOptions& o) {
  if (o.cancel && o.cancel->load(std::memory_order_relaxed))
    fail(ErrorKind::disconnected, kQuantizeFileWhere, "cancelled");
}

// What one converted tensor needs while its rows are produced.
struct Conversion {
  const GgufTensorInfo* info;
  DType from, to;
  const uint8_t* data;  // input rows in the mapping
  int64_t ne0, rows;
  size_t in_row, out_row;  // bytes
};

// Converts input row r into out (to.out_row bytes), with scratch of 2 * ne0
// floats. Refuses non-finite inputs and results llama.cpp's validation would.
void convert_row(const Conversion& c, int64_t r, uint8_t* out, float* scratch) {
  const uint8_t* src = c.data + static_cast<size_t>(r) * c.in_row;
  const float* x = reinterpret_cast<const float*>(src);
  if (c.from != DType::f32) {
    to_f32(c.from, src, scratch, c.ne0);
    x = scratch;
  }
  // The largest magnitude by its bits (for finite floats of one sign the
  // integer order is the float order; an infinity or NaN lies above every
  // finite value): an integer reduction the compiler vectorizes.
  uint32_t amax_bits = 0;
  for (int64_t i = 0; i < c.ne0; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], sizeof bits);
    amax_bits = std::max(amax_bits, bits & 0x7fffffffu);
  }
  if (amax_bits >= 0x7f800000u) {
    const int64_t i = std::find_if(x, x + c.ne0, [](float v) { return !std::isfinite(v); }) - x;
    fail(ErrorKind::invalid_input, kQuantizeFileWhere,
         tensor_label(c.info->name) + " row " + std::to_string(r) + " column " + std::to_string(i) + " holds " +
             (std::isnan(x[i]) ? "NaN" : "an infinity"));
  }
  float amax;
  std::memcpy(&amax, &amax_bits, sizeof amax);
  from_f32(c.to, x, out, c.ne0);
  if (amax < kScaleSafe) return;
  float* y = scratch + c.ne0;
  to_f32(c.to, out, y, c.ne0);
  for (int64_t i = 0; i < c.ne0; ++i) {
    if (!std::isfinite(y[i]))
      fail(ErrorKind::invalid_input, kQuantizeFileWhere,
           tensor_label(c.info->name) + " row " + std::to_string(r) + ": values up to " + std::to_string(amax) +
               " do not fit " + std::string(dtype_name(c.to)) + " (its result is not finite)");
  }
}

}  // namespace

QuantModelFacts quant_model_facts(const GgufFile& f) {
  QuantModelFacts facts;
  facts.arch = f.get_string("general.architecture").value_or("");
  // The mixes decide by tensor name (attn_v, attn_qkv, ffn_down, output ...),
  // which every family weft runs shares; only the 70B rule asks for llama or
  // qwen2 by name.
  if (!is_known_architecture(facts.arch))
    fail(ErrorKind::unsupported, kQuantizeFileWhere,
         f.path() + ": general.architecture '" + facts.arch + "' is not one weft runs (" + known_architectures() + ")");
  const std::string pre = facts.arch + ".";
  facts.n_layer = int_or_first(f, pre + "block_count").value_or(0);
  if (facts.n_layer <= 0 || facts.n_layer > 100000)
    fail(ErrorKind::invalid_input, kQuantizeFileWhere, f.path() + ": " + pre + "block_count missing or out of range");
  facts.n_head = int_or_first(f, pre + "attention.head_count").value_or(0);
  facts.n_head_kv = int_or_first(f, pre + "attention.head_count_kv").value_or(facts.n_head);
  facts.n_expert = int_or_first(f, pre + "expert_count").value_or(0);
  return facts;
}

namespace {

// Each tensor's conversion (plans[i]: its type), with every refusal before
// anything is written: i32 tensors that would convert, and quantized ones
// unless o.allow_requantize. Counts what converts into stats; max_ne0 is the
// longest row converted.
std::vector<Conversion> plan_conversions(const GgufFile& in, const std::vector<QuantTensorPlan>& plans,
                                         const QuantizeOptions& o, QuantizeStats& stats, int64_t& max_ne0) {
  const std::vector<GgufTensorInfo>& infos = in.tensors();
  std::vector<Conversion> conv(infos.size());
  for (size_t i = 0; i < infos.size(); ++i) {
    const GgufTensorInfo& t = infos[i];
    const DType from = t.dtype();  // Error(unsupported) naming the tensor
    const DType to = plans[i].keep ? from : plans[i].type;
    conv[i] = Conversion{&t, from, to, static_cast<const uint8_t*>(in.tensor_data(t)), t.ne[0],
                         elements(t) / std::max<int64_t>(1, t.ne[0]), row_bytes(from, t.ne[0]), row_bytes(to, t.ne[0])};
    stats.weights += elements(t);
    if (from == to) continue;
    if (from == DType::i32)
      fail(ErrorKind::unsupported, kQuantizeFileWhere,
           tensor_label(t.name) + " is i32, which does not convert to " + std::string(dtype_name(to)));
    if (traits(from).quantized && !o.allow_requantize)
      fail(ErrorKind::invalid_input, kQuantizeFileWhere,
           tensor_label(t.name) + " is " + std::string(dtype_name(from)) + ": requantizing to " +
               std::string(dtype_name(to)) +
               " loses more than quantizing from 16 or 32 bits; allow it with "
               "--allow-requantize");
    max_ne0 = std::max(max_ne0, t.ne[0]);
    ++stats.n_converted;
    stats.n_fallback += plans[i].fallback ? 1 : 0;
    stats.converted_weights += elements(t);
    stats.converted_bytes += conv[i].out_row * static_cast<size_t>(conv[i].rows);
  }
  stats.n_tensors = static_cast<int64_t>(infos.size());
  return conv;
}

// The input's metadata less its split keys, with the mix's file type.
void copy_metadata(const GgufFile& in, const QuantMixInfo& mix, GgufWriter& w) {
  for (const std::string& key : in.keys()) {
    if (key == "split.no" || key == "split.count" || key == "split.tensors.count") continue;
    w.set_value(key, *in.find(key));
  }
  w.set_u32("general.quantization_version", 2);
  w.set_u32("general.file_type", mix.ftype);
}

// The pipeline's jobs: one per converted tensor, in file order; job_tensor
// gets each job's tensor index.
std::vector<detail::RowJob> row_jobs(const std::vector<Conversion>& conv, std::vector<size_t>& job_tensor) {
  std::vector<detail::RowJob> jobs;
  for (size_t i = 0; i < conv.size(); ++i) {
    const Conversion& c = conv[i];
    if (c.from == c.to) continue;
    const int64_t ne0 = std::max<int64_t>(1, c.ne0);
    job_tensor.push_back(i);
    jobs.push_back(detail::RowJob{c.rows, c.out_row, std::clamp<int64_t>(kBatchValues / ne0, 1, std::max<int64_t>(1, c.rows)),
                                  std::max<int64_t>(1, kGrainValues / ne0)});
  }
  return jobs;
}

// What the tensors' producers read while GgufWriter writes; lives until the
// write returns.
struct TensorFeed {
  const std::vector<Conversion>& conv;
  const std::vector<size_t>& job_tensor;
  detail::RowPipeline& pipeline;
  const QuantizeOptions& o;
  int64_t total_weights;
  int64_t done = 0;  // weights written so far

  void report(const std::string& name) const {
    if (o.progress) o.progress(done, total_weights, name);
  }
};

// Adds every tensor to w: a copied one straight from the input's mapping, a
// converted one a batch at a time from the pipeline.
void add_tensors(GgufWriter& w, TensorFeed& feed) {
  for (size_t i = 0; i < feed.conv.size(); ++i) {
    const Conversion& c = feed.conv[i];
    const GgufTensorInfo& t = *c.info;
    const std::span<const int64_t> ne(t.ne, static_cast<size_t>(std::max(1, t.n_dims)));
    if (c.from == c.to) {
      w.add_tensor(t.name, c.to, ne, [&feed, &c, &t](const GgufWriter::TensorSink& sink) {
        for (size_t at = 0; at < t.nbytes; at += kCopyPiece) {
          check_cancel(feed.o);
          sink(c.data + at, std::min(kCopyPiece, t.nbytes - at));
        }
        feed.done += elements(t);
        feed.report(t.name);
      });
      continue;
    }
    w.add_tensor(t.name, c.to, ne, [&feed, &c, &t, i](const GgufWriter::TensorSink& sink) {
      for (int64_t rows = 0; rows < c.rows;) {
        check_cancel(feed.o);
        const detail::RowPipeline::Batch b = feed.pipeline.next();
        check_cancel(feed.o);
        if (feed.job_tensor[b.job] != i || b.first_row != rows)
          fail(ErrorKind::internal, kQuantizeFileWhere, tensor_label(t.name) + ": its rows came out of order");
        sink(b.data, b.bytes);
        rows += b.rows;
        feed.done += b.rows * c.ne0;
        feed.report(t.name);
      }
    });
  }
}

// Writes w to out_path (in parts when o.split asks) and counts the bytes
// read and written into stats.
void write_output(GgufWriter& w, const GgufFile& in, const std::string& out_path, const QuantizeOptions& o,
                  QuantizeStats& stats) {
  if (o.split.max_bytes != 0 || o.split.max_tensors != 0) {
    const bool gguf = out_path.size() > 5 && out_path.ends_with(".gguf");
    stats.out_paths = w.write_split(gguf ? out_path.substr(0, out_path.size() - 5) : out_path, o.split);
  } else {
    w.write(out_path);
    stats.out_paths = {out_path};
  }
  std::error_code ec;
  for (const GgufPart& part : in.parts()) stats.in_bytes += part.size;
  for (const std::string& path : stats.out_paths) stats.out_bytes += std::filesystem::file_size(path, ec);
}

}  // namespace

QuantizeStats quantize_file(const std::string& in_path, const std::string& out_path, const QuantizeOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const QuantMixInfo& mix = quant_mix_info(o.mix);
  std::unique_ptr<GgufFile> in = GgufFile::open(in_path);  // every part of a split model
  const QuantModelFacts facts = quant_model_facts(*in);

  const std::vector<GgufTensorInfo>& infos = in->tensors();
  std::vector<QuantTensorDesc> descs(infos.size());
  for (size_t i = 0; i < infos.size(); ++i) {
    descs[i].name = infos[i].name;
    std::copy(std::begin(infos[i].ne), std::end(infos[i].ne), descs[i].ne);
  }
  const std::vector<QuantTensorPlan> plans = plan_quant_types(facts, descs, o.mix, o.pure);

  // Every refusal before anything is written.
  QuantizeStats stats;
  int64_t max_ne0 = 0;
  const std::vector<Conversion> conv = plan_conversions(*in, plans, o, stats, max_ne0);

  GgufWriter w;
  copy_metadata(*in, mix, w);

  unsigned hw = std::thread::hardware_concurrency();
  const int threads = std::clamp(o.threads > 0 ? o.threads : static_cast<int>(hw == 0 ? 1 : hw), 1, 1024);
  std::vector<std::vector<float>> scratch(static_cast<size_t>(threads),
                                          std::vector<float>(static_cast<size_t>(2 * max_ne0)));
  std::vector<size_t> job_tensor;
  detail::RowPipeline pipeline(row_jobs(conv, job_tensor), threads, [&](size_t job, int64_t row, uint8_t* out, int th) {
    convert_row(conv[job_tensor[job]], row, out, scratch[static_cast<size_t>(th)].data());
  }, o.cancel);
  TensorFeed feed{conv, job_tensor, pipeline, o, stats.weights};
  add_tensors(w, feed);
  write_output(w, *in, out_path, o, stats);
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace weft::model
