// Graphs on the wire (docs/rpc-protocol.md section 4).
//
// Encoding: the graph's computing nodes are sent with everything they read,
// each tensor once and after its sources. Views compute nothing: one is sent
// only when a node reads it, and never listed as a node (the scheduler puts
// views over memory the worker does not have into a split's graph). Tensors
// the graph does not contain (data computed elsewhere, such as the
// scheduler's input copies) are sent as what they are to this graph: a leaf
// for one with memory of its own, a plain view of its root for one without.
//
// Decoding trusts nothing: each tensor is rebuilt by the op constructors of
// weft/core/ops.h (the same shape and dtype checks as a local caller gets) and the
// result must equal what was sent; memory comes only from live buffers of
// the session, with overflow-safe range checks.
#include <array>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "protocol/graph_codec.h"

#include "weft/backend/alloc.h"
#include "weft/core/error.h"
#include "weft/core/ops.h"

namespace weft::rpc {
namespace {

constexpr uint32_t kKnownFlags = kFlagInput | kFlagOutput | kFlagWeight;
constexpr size_t kWireTensorBytes = WireTensor::kBytes;

std::string num(uint64_t v) { return std::to_string(v); }

[[noreturn]] void graph_fail(const std::string& what) { fail(ErrorKind::invalid_input, "rpc graph", what); }

[[noreturn]] void tensor_fail(size_t i, const std::string& what) { graph_fail("tensor " + num(i) + ": " + what); }

// ---------------------------------------------------------------- encoding

// How a tensor is sent: as itself (a member of the graph with an op), as a
// leaf, or as a plain view of its root.
enum class Form { full, leaf, root_view };

class Encoder {
 public:
  Encoder(const Graph& g, const std::function<RemoteLocation(const Tensor&)>& location)
      : g_(g), location_(location) {}

  void run(Writer& w) {
    std::vector<const Tensor*> computing;
    computing.reserve(g_.nodes().size());
    index_.reserve(2 * g_.nodes().size());  // the nodes and about as many leafs and views
    for (const Tensor* t : g_.nodes()) {
      if (!op_is_view(t->op)) computing.push_back(t);
    }
    for (const Tensor* t : computing) visit(t);
    w.data().reserve(w.data().size() + 8 + order_.size() * kWireTensorBytes + computing.size() * 4);
    w.u32(static_cast<uint32_t>(order_.size()));
    for (const Tensor* t : order_) write_tensor(w, *t);
    w.u32(static_cast<uint32_t>(computing.size()));
    for (const Tensor* t : computing) w.u32(index_.at(t));
  }

 private:
  Form form_of(const Tensor& t) const {
    if (t.op != Op::none && g_.contains(&t)) return Form::full;
    return t.view_src != nullptr ? Form::root_view : Form::leaf;
  }

  // The tensors t is built from, in the form it is sent.
  std::array<const Tensor*, kMaxSrc + 1> deps_of(const Tensor& t) const {
    std::array<const Tensor*, kMaxSrc + 1> deps{};
    switch (form_of(t)) {
      case Form::full:
        for (int i = 0; i < kMaxSrc; ++i) deps[i] = t.src[i];
        deps[kMaxSrc] = t.view_src;
        break;
      case Form::root_view: deps[0] = t.view_src; break;
      case Form::leaf: break;
    }
    return deps;
  }

  // Iterative post-order walk: sources get their indices first.
  void visit(const Tensor* root) {
    if (index_.count(root)) return;
    std::vector<std::pair<const Tensor*, int>>& stack = stack_;
    stack.emplace_back(root, 0);
    on_stack_.insert(root);
    while (!stack.empty()) {
      auto& [t, next] = stack.back();
      const auto deps = deps_of(*t);
      const Tensor* dep = nullptr;
      while (next < static_cast<int>(deps.size()) && dep == nullptr) {
        const Tensor* d = deps[static_cast<size_t>(next++)];
        if (d == nullptr || index_.count(d)) continue;
        if (on_stack_.count(d)) graph_fail("tensor '" + d->name + "' depends on itself");
        dep = d;
      }
      if (dep != nullptr) {
        on_stack_.insert(dep);
        stack.emplace_back(dep, 0);
        continue;
      }
      if (order_.size() >= kMaxGraphTensors) {
        graph_fail("more than " + num(kMaxGraphTensors) + " tensors in one graph");
      }
      index_.emplace(t, static_cast<uint32_t>(order_.size()));
      order_.push_back(t);
      on_stack_.erase(t);
      stack.pop_back();
    }
  }

  uint32_t ref(const Tensor* t) const { return t == nullptr ? 0 : index_.at(t) + 1; }

  void write_tensor(Writer& w, const Tensor& t) const {
    const Form form = form_of(t);
    WireTensor r;
    r.dtype = static_cast<uint8_t>(t.type);
    r.op = static_cast<uint8_t>(form == Form::full ? t.op : form == Form::leaf ? Op::none : Op::view);
    r.flags = static_cast<uint16_t>(t.flags & kKnownFlags);
    for (int d = 0; d < kMaxDims; ++d) {
      r.ne[d] = t.ne[d];
      r.nb[d] = t.nb[d];
    }
    for (int i = 0; i < kMaxOpParams; ++i) r.op_params[i] = form == Form::full ? t.op_params[i] : 0;
    for (int i = 0; i < kWireSrc; ++i) {
      const Tensor* s = form == Form::full ? t.src[i] : form == Form::root_view && i == 0 ? t.view_src : nullptr;
      r.src[i] = ref(s);
    }
    for (int i = kWireSrc; i < kMaxSrc && form == Form::full; ++i) {
      if (t.src[i] != nullptr)
        graph_fail(shape_string(t) + " '" + t.name + "' (" + op_name(t.op) + ") has src[" + std::to_string(i) +
                   "], which the wire does not carry");
    }
    r.view_src = form == Form::leaf ? 0 : ref(t.view_src);
    r.view_offs = form == Form::leaf || t.view_src == nullptr ? 0 : t.view_offs;
    if (t.view_src == nullptr) {
      const RemoteLocation loc = location_(t);
      if (loc.handle == 0) {
        graph_fail(shape_string(t) + " '" + t.name + "' (" + op_name(t.op) + ") has no memory on the worker");
      }
      r.buffer = loc.handle;
      r.offset = loc.offset;
    }
    r.encode(w);
  }

  const Graph& g_;
  const std::function<RemoteLocation(const Tensor&)>& location_;
  std::unordered_map<const Tensor*, uint32_t> index_;
  std::vector<const Tensor*> order_;
  std::vector<std::pair<const Tensor*, int>> stack_;  // the walk in progress
  std::unordered_set<const Tensor*> on_stack_;
};

// ---------------------------------------------------------------- decoding

// The op's constructor applied to the decoded sources and parameters.
Tensor* rebuild(Context& ctx, const WireTensor& w, Tensor* const (&src)[kMaxSrc]) {
  return rebuild_op(ctx, static_cast<Op>(w.op), w.op_params, w.ne, w.nb, w.view_offs, src);
}

class Decoder {
 public:
  Decoder(Reader& r, const std::function<Buffer*(uint64_t)>& buffer_of,
          const std::function<bool(const Tensor&)>& supports)
      : r_(r), buffer_of_(buffer_of), supports_(supports), out_(std::make_unique<DecodedGraph>()) {}

  std::unique_ptr<DecodedGraph> run() {
    const uint32_t n = read_count("n_tensors");
    if (n > kMaxGraphTensors) graph_fail("n_tensors " + num(n) + " is over the cap of " + num(kMaxGraphTensors));
    if (n > r_.remaining() / kWireTensorBytes) {
      graph_fail("n_tensors " + num(n) + " needs " + num(uint64_t{n} * kWireTensorBytes) + " bytes, " +
                 num(r_.remaining()) + " left");
    }
    tensors_.reserve(n);
    srcs_.reserve(n);
    for (uint32_t i = 0; i < n; ++i) add_tensor(i);
    read_nodes();
    return std::move(out_);
  }

 private:
  uint32_t read_count(const char* field) {
    try {
      return r_.u32(field);
    } catch (const Error& e) {
      graph_fail(std::string(field) + ": " + e.what());
    }
  }

  // A source reference of tensor i: null, or an earlier tensor.
  Tensor* source(size_t i, uint32_t ref, const char* field) const {
    if (ref == 0) return nullptr;
    if (ref - 1 >= i) {
      tensor_fail(i, std::string(field) + " refers to tensor " + num(ref - 1) + ", which is not an earlier tensor");
    }
    return tensors_[ref - 1];
  }

  void add_tensor(size_t i) {
    WireTensor w;
    try {
      w = WireTensor::decode(r_);
    } catch (const Error& e) {
      tensor_fail(i, e.what());
    }
    if (w.dtype >= kDTypeCount) tensor_fail(i, "dtype " + num(w.dtype) + " is unknown");
    if (w.op >= kOpCount) tensor_fail(i, "op " + num(w.op) + " is unknown");
    if ((w.flags & ~kKnownFlags) != 0) tensor_fail(i, "flags " + num(w.flags) + " has unknown bits");
    // Element and row counts (nelements(), nrows()) must not overflow, even
    // for a tensor with a zero dim, whose other dims no memory bounds.
    int64_t nominal = 1;
    for (int d = 0; d < kMaxDims; ++d) {
      if (w.ne[d] < 0) tensor_fail(i, "ne[" + num(d) + "] is negative (" + std::to_string(w.ne[d]) + ")");
      if (w.ne[d] > 1 && nominal > kMaxNominalElements / w.ne[d]) {
        tensor_fail(i, "ne [" + std::to_string(w.ne[0]) + "," + std::to_string(w.ne[1]) + "," +
                           std::to_string(w.ne[2]) + "," + std::to_string(w.ne[3]) + "] spans more than 2^32 elements");
      }
      nominal *= w.ne[d] > 1 ? w.ne[d] : 1;
    }
    static constexpr const char* kSrcField[kWireSrc] = {"src[0]", "src[1]", "src[2]", "src[3]"};
    Tensor* src[kMaxSrc] = {};
    std::array<uint32_t, kMaxSrc> src_index{};
    for (int k = 0; k < kWireSrc; ++k) {
      src[k] = source(i, w.src[k], kSrcField[k]);
      src_index[k] = w.src[k];
    }
    Tensor* view_src = source(i, w.view_src, "view_src");
    const Op op = static_cast<Op>(w.op);

    Tensor* t = op == Op::none ? make_leaf(i, w, src, view_src) : make_node(i, w, src, view_src);
    t->flags = w.flags;
    t->name = "tensor ";
    t->name += num(i);
    bind(i, w, *t);
    tensors_.push_back(t);
    srcs_.push_back(src_index);
  }

  Tensor* make_leaf(size_t i, const WireTensor& w, Tensor* const (&src)[kMaxSrc], const Tensor* view_src) {
    for (int k = 0; k < kMaxSrc; ++k) {
      if (src[k] != nullptr) tensor_fail(i, "src[" + num(k) + "] is set on a leaf (op none)");
    }
    if (view_src != nullptr || w.view_offs != 0) tensor_fail(i, "view_src/view_offs is set on a leaf (op none)");
    Tensor* t = nullptr;
    try {
      t = out_->ctx.new_tensor(static_cast<DType>(w.dtype), w.ne);
    } catch (const Error& e) {
      tensor_fail(i, e.what());
    }
    for (int d = 0; d < kMaxDims; ++d) {
      if (t->nb[d] != w.nb[d]) {
        tensor_fail(i, "nb[" + num(d) + "] is " + num(w.nb[d]) + ", but a leaf " + shape_string(*t) +
                           " must be packed (" + num(t->nb[d]) + ")");
      }
    }
    return t;
  }

  Tensor* make_node(size_t i, const WireTensor& w, Tensor* const (&src)[kMaxSrc], const Tensor* view_src) {
    const Op op = static_cast<Op>(w.op);
    const auto what = [op] { return std::string("(") + op_name(op) + ") "; };
    Tensor* t = nullptr;
    try {
      t = rebuild(out_->ctx, w, src);
    } catch (const Error& e) {
      tensor_fail(i, e.what());  // the constructor's message names the op
    }
    const auto type = static_cast<DType>(w.dtype);
    if (t->type != type) {
      tensor_fail(i, what() + "dtype is " + std::string(dtype_name(type)) + ", but the op gives " + shape_string(*t));
    }
    for (int d = 0; d < kMaxDims; ++d) {
      if (t->ne[d] != w.ne[d]) {
        tensor_fail(i, what() + "ne[" + num(d) + "] is " + std::to_string(w.ne[d]) + ", but the op gives " +
                           shape_string(*t));
      }
      if (t->nb[d] != w.nb[d]) {
        tensor_fail(i, what() + "nb[" + num(d) + "] is " + num(w.nb[d]) + ", but the op gives " + num(t->nb[d]));
      }
    }
    for (int k = 0; k < kMaxSrc; ++k) {
      if (t->src[k] != src[k]) tensor_fail(i, what() + "src[" + num(k) + "] is not what the op takes there");
    }
    // A parameter a compute op does not read must be 0: a newer peer's
    // meaning is never silently dropped (protocol 1.6). Views are rebuilt
    // from their layout, and what they carry in op_params no kernel reads.
    for (int k = 0; k < kMaxOpParams && !op_is_view(op); ++k) {
      if (t->op_params[k] != w.op_params[k]) {
        tensor_fail(i, what() + "op_params[" + num(k) + "] is " + std::to_string(w.op_params[k]) +
                           ", but the op gives " + std::to_string(t->op_params[k]));
      }
    }
    if (t->view_src != view_src) {
      tensor_fail(i, what() + "view_src is " + (view_src ? "tensor " + num(w.view_src - 1) : std::string("none")) +
                         ", but the op gives " + (t->view_src ? t->view_src->name : std::string("none")));
    }
    if (t->view_offs != w.view_offs) {
      tensor_fail(i, what() + "view_offs is " + num(w.view_offs) + ", but the op gives " + num(t->view_offs));
    }
    return t;
  }

  // Memory: a tensor of its own in a live buffer, or a view of its (bound) root.
  // Kernels read elements through typed pointers: data and strides must
  // be multiples of the storage unit's alignment (most quantized blocks
  // start with a 16-bit scale, mxfp4's with a byte).
  static size_t alignment_of(DType type) { return storage_alignment(type); }

  static void check_alignment(size_t i, const Tensor& t, uintptr_t address, uint64_t offset) {
    const size_t align = alignment_of(t.type);
    if (address % align != 0) {
      tensor_fail(i, "data at byte " + num(offset) + " is not aligned to " + num(align) + " bytes for " +
                         std::string(dtype_name(t.type)));
    }
    for (int d = 0; d < kMaxDims; ++d) {
      if (t.ne[d] > 1 && t.nb[d] % align != 0) {
        tensor_fail(i, "nb[" + num(d) + "] " + num(t.nb[d]) + " is not a multiple of " + num(align) + " bytes for " +
                           std::string(dtype_name(t.type)));
      }
    }
  }

  void bind(size_t i, const WireTensor& w, Tensor& t) {
    if (t.view_src != nullptr) {
      if (w.buffer != 0 || w.offset != 0) {
        tensor_fail(i, "buffer " + num(w.buffer) + " / offset " + num(w.offset) +
                           " is set on a tensor that aliases another's memory (must be 0)");
      }
      // The root is bound (it is earlier) and the view lies inside it.
      check_alignment(i, t, reinterpret_cast<uintptr_t>(t.view_src->data) + t.view_offs, t.view_offs);
      try {
        bind_view(t);
      } catch (const Error& e) {
        tensor_fail(i, e.what());
      }
      return;
    }
    if (w.buffer == 0) tensor_fail(i, "buffer is 0, but " + shape_string(t) + " needs memory of its own");
    Buffer* buf = buffer_of_(w.buffer);
    if (buf == nullptr) tensor_fail(i, "buffer " + num(w.buffer) + " is not a live buffer of this session");
    const size_t size = buf->size();
    const size_t n = t.nbytes();
    if (w.offset > size || n > size - w.offset) {
      tensor_fail(i, "offset " + num(w.offset) + " + " + num(n) + " bytes of " + shape_string(t) +
                         " is outside buffer " + num(w.buffer) + " (" + num(size) + " bytes)");
    }
    check_alignment(i, t, reinterpret_cast<uintptr_t>(buf->base()) + w.offset, w.offset);
    t.buffer = buf;
    t.data = static_cast<uint8_t*>(buf->base()) + w.offset;
    try {
      buf->init_tensor(t);
    } catch (const Error& e) {
      tensor_fail(i, e.what());
    }
  }

  void read_nodes() {
    const size_t n_tensors = tensors_.size();
    const uint32_t n = read_count("n_nodes");
    if (n > n_tensors) graph_fail("n_nodes " + num(n) + " is more than n_tensors " + num(n_tensors));
    std::vector<uint32_t> order(n);
    listed_.assign(n_tensors, 0);
    for (uint32_t k = 0; k < n; ++k) {
      uint32_t idx = 0;
      try {
        idx = r_.u32("node index");
      } catch (const Error& e) {
        graph_fail("node " + num(k) + ": " + e.what());
      }
      if (idx >= n_tensors) {
        graph_fail("node " + num(k) + ": index " + num(idx) + " is out of range (n_tensors " + num(n_tensors) + ")");
      }
      if (tensors_[idx]->op == Op::none) {
        graph_fail("node " + num(k) + ": tensor " + num(idx) + " is a leaf (op none), not a computed tensor");
      }
      if (listed_[idx]) graph_fail("node " + num(k) + ": tensor " + num(idx) + " is listed twice");
      listed_[idx] = 1;
      order[k] = idx;
    }
    // Leafs first; then each node after the unlisted views it reads.
    Graph& g = out_->graph;
    appended_.assign(n_tensors, 0);
    for (size_t i = 0; i < n_tensors; ++i) {
      if (tensors_[i]->op == Op::none) {
        g.append(tensors_[i]);
        appended_[i] = 1;
      }
    }
    for (uint32_t k = 0; k < n; ++k) {
      const uint32_t idx = order[k];
      for (uint32_t ref : srcs_[idx]) {
        if (ref != 0) append_views_before(k, idx, ref - 1);
      }
      check_writes(k, idx);
      if (!supports_(*tensors_[idx])) {
        graph_fail("node " + num(k) + ": tensor " + num(idx) + " (" + op_name(tensors_[idx]->op) + " " +
                   shape_string(*tensors_[idx]) + ") is not supported by the device");
      }
      g.append(tensors_[idx]);
      appended_[idx] = 1;
    }
  }

  // A node never writes bytes it also reads, except in the one form the
  // planner makes on purpose: an in-place op (op_can_run_in_place) exactly
  // over its src[0] (same start, same size, same dtype, both packed). Any
  // other overlap would make kernels read what they are writing (undefined
  // results, overlapping copies), so it is refused here, before anything runs.
  // set_rows and cpy write into their destination operand (the registry's
  // writes_src), which is skipped.
  void check_writes(uint32_t k, uint32_t idx) const {
    const Tensor& t = *tensors_[idx];
    if (op_is_view(t.op)) return;  // writes nothing
    const auto [d0, d1] = extent(t);
    if (d0 == d1) return;
    const int own_target = op_info(t.op).writes_src;
    for (int s = 0; s < kMaxSrc; ++s) {
      const Tensor* src = t.src[s];
      if (src == nullptr || s == own_target) continue;
      const auto [s0, s1] = extent(*src);
      if (s0 == s1 || s1 <= d0 || d1 <= s0) continue;
      const bool in_place = s == 0 && op_can_run_in_place(t.op) && s0 == d0 && s1 == d1 && src->type == t.type &&
                            src->is_contiguous() && t.is_contiguous();
      if (in_place) continue;
      graph_fail("node " + num(k) + ": tensor " + num(idx) + " (" + op_name(t.op) + " " + shape_string(t) +
                 ") writes bytes that its src[" + num(s) + "] (tensor " + num(srcs_[idx][s] - 1) +
                 ") reads; only an in-place op exactly over its src[0] may overlap");
    }
  }

  static std::pair<uintptr_t, uintptr_t> extent(const Tensor& t) {
    const auto begin = reinterpret_cast<uintptr_t>(t.data);
    return {begin, begin + t.nbytes()};
  }

  // Appends the chain of unlisted views from s back to computed data, oldest
  // first. A listed node met on the way must already be in the graph.
  void append_views_before(uint32_t k, uint32_t node, uint32_t s) {
    std::vector<uint32_t> chain;
    for (uint32_t cur = s;;) {
      if (appended_[cur]) break;
      if (listed_[cur]) {
        graph_fail("node " + num(k) + ": tensor " + num(node) + " reads tensor " + num(cur) +
                   ", which is listed later in the node list");
      }
      if (!op_is_view(tensors_[cur]->op)) break;  // computed earlier, outside this graph
      chain.push_back(cur);
      const uint32_t ref = srcs_[cur][0];
      if (ref == 0) break;
      cur = ref - 1;
    }
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      out_->graph.append(tensors_[*it]);
      appended_[*it] = 1;
    }
  }

  Reader& r_;
  const std::function<Buffer*(uint64_t)>& buffer_of_;
  const std::function<bool(const Tensor&)>& supports_;
  std::unique_ptr<DecodedGraph> out_;
  std::vector<Tensor*> tensors_;                     // by wire index
  std::vector<std::array<uint32_t, kMaxSrc>> srcs_;  // wire src refs, by index
  std::vector<uint8_t> listed_;                      // in the node list
  std::vector<uint8_t> appended_;                    // already in out_->graph
};

}  // namespace

Tensor* rebuild_op(Context& ctx, Op op, const int32_t (&params)[kMaxOpParams], const int64_t (&ne)[kMaxDims],
                   const uint64_t (&nb)[kMaxDims], uint64_t view_offs, Tensor* const (&src)[kMaxSrc]) {
  // Leafs are made by make_leaf; a value outside Op is refused before this.
  if (!op_is_known(static_cast<int>(op)) || op_info(op).rebuild == nullptr) {
    fail(ErrorKind::internal, "rpc graph", "no constructor for op " + num(static_cast<unsigned>(op)));
  }
  return op_info(op).rebuild(ctx, OpArgs{params, ne, nb, view_offs, src});
}

void WireTensor::encode(Writer& w) const {
  w.u8(dtype);
  w.u8(op);
  w.u16(flags);
  for (int64_t n : ne) w.i64(n);
  for (uint64_t n : nb) w.u64(n);
  for (int32_t p : op_params) w.i32(p);
  for (uint32_t s : src) w.u32(s);
  w.u32(view_src);
  w.u64(view_offs);
  w.u64(buffer);
  w.u64(offset);
}

WireTensor WireTensor::decode(Reader& r) {
  WireTensor w;
  w.dtype = r.u8("dtype");
  w.op = r.u8("op");
  w.flags = r.u16("flags");
  for (int64_t& n : w.ne) n = r.i64("ne");
  for (uint64_t& n : w.nb) n = r.u64("nb");
  for (int32_t& p : w.op_params) p = r.i32("op_params");
  for (uint32_t& s : w.src) s = r.u32("src");
  w.view_src = r.u32("view_src");
  w.view_offs = r.u64("view_offs");
  w.buffer = r.u64("buffer");
  w.offset = r.u64("offset");
  return w;
}

size_t decoded_graph_bytes(size_t n_tensors) {
  // Per tensor: the Tensor in the Context's deque, its Graph entry (vector
  // slot and visited-set node and bucket), and the decoder's tables
  // (pointer, source refs, two flags); plus a fixed part for the containers.
  constexpr size_t kPerTensor = sizeof(Tensor) + 96 + sizeof(Tensor*) + sizeof(std::array<uint32_t, kMaxSrc>) + 2;
  constexpr size_t kFixed = 4096;
  return kFixed + n_tensors * kPerTensor;
}

size_t max_graph_tensors_in(size_t payload_bytes) { return payload_bytes / kWireTensorBytes; }

void encode_graph(Writer& w, const Graph& g, const std::function<RemoteLocation(const Tensor&)>& location) {
  Encoder(g, location).run(w);
}

std::unique_ptr<DecodedGraph> decode_graph(Reader& r, const std::function<Buffer*(uint64_t)>& buffer_of,
                                           const std::function<bool(const Tensor&)>& supports) {
  return Decoder(r, buffer_of, supports).run();
}

}  // namespace weft::rpc
