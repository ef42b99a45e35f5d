// Tensor parallelism at load: the layers of a run cut by heads into shards
// (LlamaLayer::Shard, ModelLayout::tensor_shares, docs/placement.md). Row
// slices are runs of the file's bytes (mapped in place where they may be);
// the column slices of wo and ffn_down are gathered from every row at load.
#include <algorithm>
#include <cmath>
#include <string>

#include "model/llama_weights.h"
#include "weft/core/error.h"

namespace weft::model {

std::vector<int64_t> ffn_bounds(std::span<const int64_t> kv_bounds, int64_t n_head_kv, int64_t n_ff, int64_t align) {
  if (kv_bounds.size() < 2 || n_head_kv <= 0 || n_ff < 0 || align <= 0)
    fail(ErrorKind::invalid_input, "model", "ffn_bounds: no shares, heads or columns");
  std::vector<int64_t> b{0};
  for (size_t i = 1; i + 1 < kv_bounds.size(); ++i) {
    const double share = static_cast<double>(kv_bounds[i]) / static_cast<double>(n_head_kv);
    const int64_t at = std::llround(share * static_cast<double>(n_ff) / static_cast<double>(align)) * align;
    b.push_back(std::clamp<int64_t>(at, b.back(), n_ff));
  }
  b.push_back(n_ff);
  return b;
}

namespace detail {
namespace {

constexpr const char* kLlamaShardsWhere = "model";

// Appended in place: GCC 12 misreads "[" + std::string&& as an overlapping
// copy (-Wrestrict, GCC bug 105329).
std::string range(int64_t first, int64_t count) {
  std::string r = "[";
  r.append(std::to_string(first)).append(", ").append(std::to_string(first + count)).append(")");
  return r;
}

// Elements [first, first + count) of each row's run start on a block of
// whole's type, or the cut is refused naming why.
void check_blocks(const Tensor* whole, int64_t first, int64_t count, const char* what) {
  const int64_t block = traits(whole->type).block_size;
  if (first % block != 0 || count % block != 0)
    fail(ErrorKind::invalid_input, kLlamaShardsWhere,
         "tensor parallelism: " + whole->name + " (" + std::string(dtype_name(whole->type)) + ", blocks of " +
             std::to_string(block) + " values) cannot be cut at " + what + " " + range(first, count) +
             ": a share must start and end on a block (move the split)");
}

// Rows [first, first + count) of whole (ne[1] its rows): a run of its bytes.
Tensor* row_slice(ModelWeights& w, Context& ctx, const Tensor* whole, int64_t first, int64_t count) {
  Tensor* t = ctx.new_tensor(whole->type, {whole->ne[0], count});
  t->name = whole->name;  // its bytes are a run of that file tensor's
  t->flags |= kFlagWeight;
  w.slice_offset[t] = static_cast<size_t>(first) * whole->nb[1];
  return t;
}

// Elements [first, first + count) of a vector (a bias, the sinks, a norm).
Tensor* vector_slice(ModelWeights& w, Context& ctx, const Tensor* whole, int64_t first, int64_t count) {
  if (whole == nullptr) return nullptr;
  check_blocks(whole, first, count, "elements");
  Tensor* t = ctx.new_tensor(whole->type, {count});
  t->name = whole->name;
  t->flags |= kFlagWeight;
  w.slice_offset[t] = row_bytes(whole->type, first);
  return t;
}

// Columns [first, first + count) of every row of whole, gathered at load.
Tensor* column_slice(ModelWeights& w, Context& ctx, const Tensor* whole, int64_t first, int64_t count) {
  check_blocks(whole, first, count, "columns");
  Tensor* t = ctx.new_tensor(whole->type, {count, whole->ne[1]});
  t->name = whole->name + ".cols" + std::to_string(first) + "-" + std::to_string(first + count);
  t->flags |= kFlagWeight;
  w.derived[t] = {whole->name, false, first};
  return t;
}

// The parts of shares whose home is `home`, in part order.
std::vector<int> run_parts(std::span<const TensorShare> shares, int home) {
  std::vector<int> parts;
  for (size_t q = 0; q < shares.size(); ++q)
    if (shares[q].home == home) parts.push_back(static_cast<int>(q));
  return parts;
}

// The shares of one run tile [0, n) in part order by the range `of` picks.
template <class Range>
void check_tiles(std::span<const TensorShare> shares, const std::vector<int>& parts, int64_t n, const char* what,
                 Range of) {
  int64_t next = 0;
  for (int q : parts) {
    const auto [first, last] = of(shares[static_cast<size_t>(q)]);
    if (first != next || last < first)
      fail(ErrorKind::invalid_input, kLlamaShardsWhere,
           "tensor parallelism: part " + std::to_string(q) + "'s " + what + " [" + std::to_string(first) + ", " +
               std::to_string(last) + ") do not continue at " + std::to_string(next) + " of " + std::to_string(n));
    next = last;
  }
  if (next != n)
    fail(ErrorKind::invalid_input, kLlamaShardsWhere,
         std::string("tensor parallelism: the ") + what + " end at " + std::to_string(next) + " of " +
             std::to_string(n));
}

void cut_attention(ModelWeights& w, Context& ctx, const LlamaParams& p, const LlamaLayer& l, bool home,
                   LlamaLayer::Shard& s) {
  const int64_t hd = p.head_dim, q_dim = hd * p.n_head, kv_dim = hd * p.n_head_kv;
  if (l.wqkv) {  // Phi-3: the q rows, the k rows and the v rows of one matrix
    s.wq = row_slice(w, ctx, l.wqkv, s.first_head * hd, s.n_head * hd);
    s.wk = row_slice(w, ctx, l.wqkv, q_dim + s.first_kv * hd, s.n_kv * hd);
    s.wv = row_slice(w, ctx, l.wqkv, q_dim + kv_dim + s.first_kv * hd, s.n_kv * hd);
  } else {
    s.wq = row_slice(w, ctx, l.wq, s.first_head * hd, s.n_head * hd);
    s.wk = row_slice(w, ctx, l.wk, s.first_kv * hd, s.n_kv * hd);
    s.wv = row_slice(w, ctx, l.wv, s.first_kv * hd, s.n_kv * hd);
  }
  s.bq = vector_slice(w, ctx, l.bq, s.first_head * hd, s.n_head * hd);
  s.bk = vector_slice(w, ctx, l.bk, s.first_kv * hd, s.n_kv * hd);
  s.bv = vector_slice(w, ctx, l.bv, s.first_kv * hd, s.n_kv * hd);
  s.wo = column_slice(w, ctx, l.wo, s.first_head * hd, s.n_head * hd);
  s.attn_sinks = vector_slice(w, ctx, l.attn_sinks, s.first_head, s.n_head);
  s.q_norm = home || !l.q_norm ? l.q_norm : vector_slice(w, ctx, l.q_norm, 0, hd);
  s.k_norm = home || !l.k_norm ? l.k_norm : vector_slice(w, ctx, l.k_norm, 0, hd);
}

void cut_ffn(ModelWeights& w, Context& ctx, const LlamaParams& p, const LlamaLayer& l, LlamaLayer::Shard& s) {
  if (s.n_ff == 0) return;
  if (l.w_gate) {
    s.gate = row_slice(w, ctx, l.w_gate, s.first_ff, s.n_ff);
    s.up = row_slice(w, ctx, l.w_up, s.first_ff, s.n_ff);
  } else {  // Phi-3's fused w_up: the gate's rows, then the up's
    s.gate = row_slice(w, ctx, l.w_up, s.first_ff, s.n_ff);
    s.up = row_slice(w, ctx, l.w_up, p.n_ff + s.first_ff, s.n_ff);
  }
  s.down = column_slice(w, ctx, l.w_down, s.first_ff, s.n_ff);
}

// The output matrix cut by vocabulary rows over the parts of the last
// layer's run, in proportion to their key/value heads, so no part reads
// the whole matrix per token. Rows are whole (any type cuts there).
void cut_output(ModelWeights& w, const LlamaParams& p, int home, const std::vector<int>& parts,
                std::span<const TensorShare> shares, Context& ctx) {
  const bool tied = w.output == w.tok_embd;
  int64_t first = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const TensorShare& share = shares[static_cast<size_t>(parts[i])];
    const int64_t last = i + 1 == parts.size()
                             ? p.n_vocab
                             : std::llround(static_cast<double>(share.last_kv) / static_cast<double>(p.n_head_kv) *
                                            static_cast<double>(p.n_vocab));
    OutputSlice o{parts[i], first, last - first, nullptr};
    if (o.count > 0) {
      if (!tied || parts[i] != 0) o.w = row_slice(w, ctx, w.output, first, o.count);
      w.output_slices.push_back(o);
    }
    first = last;
  }
  w.output_part = home;
}

}  // namespace

void split_tensor_parallel(ModelWeights& w, const LlamaParams& p, std::span<const int> layer_part,
                           std::span<const TensorShare> shares, Context& ctx) {
  for (size_t il = 0; il < w.layers.size(); ++il) {
    const int home = layer_part[il];
    const std::vector<int> parts = run_parts(shares, home);
    if (parts.size() < 2) continue;
    if (p.encoder)
      fail(ErrorKind::unsupported, kLlamaShardsWhere,
           "tensor parallelism of " + p.arch_name + ": an encoder is split by layers");
    if (p.mla())
      fail(ErrorKind::unsupported, kLlamaShardsWhere,
           "tensor parallelism of " + p.arch_name +
               ": multi-head latent attention caches one key/value head for all (split by layers)");
    if (std::find(parts.begin(), parts.end(), home) == parts.end())
      fail(ErrorKind::invalid_input, kLlamaShardsWhere,
           "tensor parallelism: layer " + std::to_string(il) + "'s part has no share");
    LlamaLayer& l = w.layers[il];
    const bool dense = l.w_down != nullptr && l.ffn_gate_inp == nullptr;
    check_tiles(shares, parts, p.n_head_kv, "key/value heads",
                [](const TensorShare& s) { return std::pair{s.first_kv, s.last_kv}; });
    if (dense)
      check_tiles(shares, parts, p.n_ff, "feed-forward columns",
                  [](const TensorShare& s) { return std::pair{s.first_ff, s.last_ff}; });
    const int64_t group = p.n_head / p.n_head_kv;
    for (int q : parts) {
      const TensorShare& share = shares[static_cast<size_t>(q)];
      // A part without heads computes feed-forward columns only: not the
      // home (it holds the layer), and not in a layer whose feed-forward is
      // not cut (a mixture of experts), where it would have nothing to do.
      if (share.last_kv == share.first_kv && (q == home || !dense || share.last_ff == share.first_ff))
        fail(ErrorKind::invalid_input, kLlamaShardsWhere,
             "tensor parallelism: part " + std::to_string(q) + " has no key/value head of layer " + std::to_string(il) +
                 (q == home || !dense ? "" : ", nor feed-forward columns"));
      LlamaLayer::Shard s;
      s.part = q;
      s.first_kv = share.first_kv;
      s.n_kv = share.last_kv - share.first_kv;
      s.first_head = s.first_kv * group;
      s.n_head = s.n_kv * group;
      if (dense) {
        s.first_ff = share.first_ff;
        s.n_ff = share.last_ff - share.first_ff;
      }
      if (s.n_kv > 0) cut_attention(w, ctx, p, l, q == home, s);
      if (dense) cut_ffn(w, ctx, p, l, s);
      l.shards.push_back(s);
    }
    l.wq = l.wk = l.wv = l.wqkv = l.bq = l.bk = l.bv = l.wo = l.attn_sinks = nullptr;
    if (dense) l.w_gate = l.w_up = l.w_down = nullptr;
  }
  if (w.layers.empty()) return;
  const int last_home = layer_part.back();
  const std::vector<int> last_run = run_parts(shares, last_home);
  if (last_run.size() >= 2) cut_output(w, p, last_home, last_run, shares, ctx);
}

std::vector<uint8_t> cut_columns(const GgufFile& file, const std::string& source, int64_t first, const Tensor& t) {
  const GgufTensorInfo* info = file.find_tensor(source);
  if (info == nullptr || info->n_dims != 2 || first < 0 || first + t.ne[0] > info->ne[0] || info->ne[1] != t.ne[1])
    fail(ErrorKind::internal, kLlamaShardsWhere,
         file.path() + ": " + source + " does not hold the columns of " + t.name);
  const size_t whole_row = row_bytes(info->dtype(), info->ne[0]);
  const size_t skip = row_bytes(info->dtype(), first);
  const size_t row = row_bytes(t.type, t.ne[0]);
  const auto* src = static_cast<const uint8_t*>(file.tensor_data(*info));
  std::vector<uint8_t> out(t.nbytes());
  for (int64_t r = 0; r < t.ne[1]; ++r)
    std::copy_n(src + static_cast<size_t>(r) * whole_row + skip, row, out.data() + static_cast<size_t>(r) * row);
  return out;
}

}  // namespace detail
}  // namespace weft::model
