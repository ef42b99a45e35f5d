// quantize_file: the GGUF rewrite of `weft quantize`. Plans every tensor's
// type first (so a refused input fails before anything is written), then
// streams the output through GgufWriter: each converted tensor is produced a
// batch of rows at a time, the rows of a batch converted in parallel into one
// buffer, so memory stays at a batch per run however large the model.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

#include "weft/core/error.h"
#include "weft/model/model.h"
#include "weft/model/quantize.h"

namespace weft::model {
namespace {

constexpr const char* kWhere = "quantize";
constexpr int64_t kBatchValues = int64_t{4} << 20;  // input values converted per batch (of whole rows)
constexpr int64_t kGrainValues = 16384;              // values a thread claims at a time (whole rows)
constexpr size_t kCopyPiece = size_t{16} << 20;      // bytes of a copied tensor written between cancel checks
// Below this magnitude every type's f16 scales and mins are finite, so the
// result needs no check; rows reaching it are decoded again and checked.
constexpr float kScaleSafe = 16384.0f;

std::string tensor_label(const std::string& name) { return "tensor '" + name + "'"; }

// Runs fn(begin, end, thread) over [0, n) in grains on a fixed set of threads,
// the caller being thread 0. Threads live as long as the pool; the first
// exception any of them throws is rethrown by run() once all have stopped.
class RowPool {
 public:
  using Fn = std::function<void(int64_t, int64_t, int)>;

  explicit RowPool(int threads) {
    for (int t = 1; t < threads; ++t) threads_.emplace_back([this, t] { worker(t); });
  }
  ~RowPool() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    start_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  RowPool(const RowPool&) = delete;
  RowPool& operator=(const RowPool&) = delete;

  int size() const { return static_cast<int>(threads_.size()) + 1; }

  void run(int64_t n, int64_t grain, const Fn& fn) {
    {
      std::lock_guard<std::mutex> lock(m_);
      fn_ = &fn;
      n_ = n;
      grain_ = std::max<int64_t>(1, grain);
      next_ = 0;
      failed_ = false;
      error_ = nullptr;
      busy_ = static_cast<int>(threads_.size());
      ++generation_;
    }
    start_.notify_all();
    share(0);
    std::unique_lock<std::mutex> lock(m_);
    done_.wait(lock, [this] { return busy_ == 0; });
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void worker(int t) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(m_);
        start_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      share(t);
      std::lock_guard<std::mutex> lock(m_);
      if (--busy_ == 0) done_.notify_one();
    }
  }

  void share(int t) {
    try {
      for (;;) {
        if (failed_.load(std::memory_order_relaxed)) return;
        const int64_t b = next_.fetch_add(grain_);
        if (b >= n_) return;
        (*fn_)(b, std::min(n_, b + grain_), t);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(m_);
      if (!error_) error_ = std::current_exception();
      failed_ = true;
    }
  }

  std::vector<std::thread> threads_;
  std::mutex m_;
  std::condition_variable start_, done_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  int busy_ = 0;
  const Fn* fn_ = nullptr;
  int64_t n_ = 0, grain_ = 1;
  std::atomic<int64_t> next_{0};
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
};

int64_t elements(const GgufTensorInfo& t) {
  int64_t n = 1;
  for (int64_t d : t.ne) n *= d;
  return n;
}

// An integer key, or element 0 of a per-layer array of them.
std::optional<int64_t> int_or_first(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.find(key);
  if (v && v->type == GgufType::array) {
    if (v->arr.empty()) fail(ErrorKind::invalid_input, kWhere, f.path() + ": " + key + " is an empty array");
    const GgufValue e = v->arr.element(0);
    return e.type == GgufType::i8 || e.type == GgufType::i16 || e.type == GgufType::i32 || e.type == GgufType::i64
               ? e.i
               : static_cast<int64_t>(e.u);
  }
  return f.get_i64(key);
}

void check_cancel(const QuantizeOptions& o) {
  if (o.cancel && o.cancel->load(std::memory_order_relaxed)) fail(ErrorKind::disconnected, kWhere, "cancelled");
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
  float amax = 0;
  for (int64_t i = 0; i < c.ne0; ++i) {
    if (!std::isfinite(x[i]))
      fail(ErrorKind::invalid_input, kWhere,
           tensor_label(c.info->name) + " row " + std::to_string(r) + " column " + std::to_string(i) + " holds " +
               (std::isnan(x[i]) ? "NaN" : "an infinity"));
    amax = std::max(amax, std::fabs(x[i]));
  }
  from_f32(c.to, x, out, c.ne0);
  if (amax < kScaleSafe) return;
  float* y = scratch + c.ne0;
  to_f32(c.to, out, y, c.ne0);
  for (int64_t i = 0; i < c.ne0; ++i) {
    if (!std::isfinite(y[i]))
      fail(ErrorKind::invalid_input, kWhere,
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
    fail(ErrorKind::unsupported, kWhere,
         f.path() + ": general.architecture '" + facts.arch + "' is not one weft runs (" + known_architectures() +
             ")");
  const std::string pre = facts.arch + ".";
  facts.n_layer = int_or_first(f, pre + "block_count").value_or(0);
  if (facts.n_layer <= 0 || facts.n_layer > 100000)
    fail(ErrorKind::invalid_input, kWhere, f.path() + ": " + pre + "block_count missing or out of range");
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
      fail(ErrorKind::unsupported, kWhere, tensor_label(t.name) + " is i32, which does not convert to " +
                                               std::string(dtype_name(to)));
    if (traits(from).quantized && !o.allow_requantize)
      fail(ErrorKind::invalid_input, kWhere,
           tensor_label(t.name) + " is " + std::string(dtype_name(from)) + ": requantizing to " +
               std::string(dtype_name(to)) + " loses more than quantizing from 16 or 32 bits; allow it with "
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
  RowPool pool(threads);
  std::vector<std::vector<float>> scratch(static_cast<size_t>(threads),
                                          std::vector<float>(static_cast<size_t>(2 * max_ne0)));
  std::vector<uint8_t> batch;
  int64_t done = 0;
  auto report = [&](const std::string& name) {
    if (o.progress) o.progress(done, stats.weights, name);
  };

  for (size_t i = 0; i < infos.size(); ++i) {
    const Conversion& c = conv[i];
    const GgufTensorInfo& t = *c.info;
    const std::span<const int64_t> ne(t.ne, static_cast<size_t>(std::max(1, t.n_dims)));
    if (c.from == c.to) {
      w.add_tensor(t.name, c.to, ne, [&](const GgufWriter::TensorSink& sink) {
        for (size_t at = 0; at < t.nbytes; at += kCopyPiece) {
          check_cancel(o);
          sink(c.data + at, std::min(kCopyPiece, t.nbytes - at));
        }
        done += elements(t);
        report(t.name);
      });
      continue;
    }
    w.add_tensor(t.name, c.to, ne, [&](const GgufWriter::TensorSink& sink) {
      const int64_t per_batch = std::clamp<int64_t>(kBatchValues / std::max<int64_t>(1, c.ne0), 1, c.rows);
      const int64_t grain = std::max<int64_t>(1, kGrainValues / std::max<int64_t>(1, c.ne0));
      batch.resize(static_cast<size_t>(per_batch) * c.out_row);
      for (int64_t r0 = 0; r0 < c.rows; r0 += per_batch) {
        check_cancel(o);
        const int64_t n = std::min(per_batch, c.rows - r0);
        pool.run(n, grain, [&](int64_t b, int64_t e, int th) {
          if (o.cancel && o.cancel->load(std::memory_order_relaxed)) return;
          for (int64_t r = b; r < e; ++r)
            convert_row(c, r0 + r, batch.data() + static_cast<size_t>(r) * c.out_row, scratch[static_cast<size_t>(th)].data());
        });
        check_cancel(o);
        sink(batch.data(), static_cast<size_t>(n) * c.out_row);
        done += n * c.ne0;
        report(t.name);
      }
    });
  }
  write_output(w, *in, out_path, o, stats);
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace weft::model
