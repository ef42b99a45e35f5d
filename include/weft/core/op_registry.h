// The op registry: every op's number, name and facts in one table, one row
// per op. What differs by op outside a kernel is read from here: the RPC
// codec and SUPPORTS_OP rebuild a received node through the row's
// `rebuild`, the worker's compute budget prices it with `cost`, the memory
// planner asks `in_place`, a client asks `minor` whether a worker knows the
// op, and docs/ops.md lists the rows (a test holds the two equal).
//
//   const OpInfo& info = op_info(node.op);
//   if (info.kind == OpKind::compute && static_cast<int>(info.minor) <= peer_minor) ...
//
// Adding an op: append its value to `Op` and its row to kOpRegistry (the
// static_asserts below refuse a row out of order, incomplete or
// inconsistent), then its constructor and rebuild adapter (ops.h,
// src/core/ops_*.cpp) and its CPU kernel (docs/architecture.md, "A new op").
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace weft {

// Appended only: the value is the RPC wire number (docs/rpc-protocol.md), and
// an older worker refuses a newer op by number.
enum class Op : uint8_t {
  none,  // a leaf: data supplied from outside the graph
  // elementwise, second operand broadcast over the first
  add, sub, mul, div,
  // elementwise unary
  scale, sqr, sqrt, silu, gelu,
  swiglu,  // silu(a) * b
  // along rows (dim 0)
  rms_norm, norm, soft_max, rope, sum_rows, argmax, argsort, top_k,
  // matrix products
  mul_mat, mul_mat_id,
  // data movement
  get_rows, set_rows, cpy, cont, concat,
  // views: no computation, they alias their source
  view, reshape, permute, transpose,
  // protocol 1.2: elementwise unary, and rope with frequency factors and scaling
  gelu_erf, sigmoid, softcap, rope_ext,
  // protocol 1.3: fused attention
  flash_attn,
  // protocol 1.7: the rows a slice of experts reads
  routed_rows,
  // protocol 1.9: gpt-oss's clamped SwiGLU
  swiglu_oai,
};
inline constexpr int kOpCount = static_cast<int>(Op::swiglu_oai) + 1;

struct Tensor;
class Context;
struct GraphCost;

// What a node is: data from outside (leaf), computed by a kernel (compute),
// or an alias of its source's memory that computes nothing (view).
enum class OpKind : uint8_t { leaf, compute, view };

// What a node is rebuilt from on the receiving side of the wire: its sources
// and parameters, and the layout the view ops read (ne, nb, view_offs).
struct OpArgs {
  const int32_t* params;  // kMaxOpParams words (op_params)
  const int64_t* ne;      // kMaxDims
  const uint64_t* nb;     // kMaxDims
  uint64_t view_offs;     // from the root's start
  Tensor* const* src;     // kMaxSrc; null where absent

  int32_t i32(int i) const { return params[i]; }
  float f32(int i) const {
    float f;
    std::memcpy(&f, &params[i], sizeof f);
    return f;
  }
};

// One op's row. `rebuild` applies the op's constructor (weft/core/ops.h)
// to OpArgs, so a received node passes every check a local one does; it
// throws the constructor's Error. `cost` fills GraphCost::multiply_adds of a
// node whose `bytes` are already counted (graph_cost.cpp), and may add bytes
// a kernel reads more than once.
struct OpInfo {
  Op op;
  const char* name;        // also each constructor's error prefix, "[name]"
  OpKind kind;
  uint8_t min_src;         // sources the constructor requires (src[0 .. min_src))
  uint8_t max_src;         // slots it may fill (optional ones after the required)
  uint8_t minor;           // the RPC protocol minor (1.minor) that introduced the op
  bool in_place;           // may run over src[0]'s memory (op_can_run_in_place)
  int8_t writes_src;       // the source whose memory the node writes (set_rows, cpy), or -1
  Tensor* (*rebuild)(Context& ctx, const OpArgs& args);  // null for a leaf
  void (*cost)(const Tensor& node, GraphCost& c);        // null where nothing is computed
};

// The rebuild adapters (defined beside their constructors in
// src/core/ops_*.cpp) and cost rules (src/core/graph_cost.cpp) the rows
// name. Called only through kOpRegistry.
namespace detail {
Tensor* rebuild_add(Context&, const OpArgs&);
Tensor* rebuild_sub(Context&, const OpArgs&);
Tensor* rebuild_mul(Context&, const OpArgs&);
Tensor* rebuild_div(Context&, const OpArgs&);
Tensor* rebuild_scale(Context&, const OpArgs&);
Tensor* rebuild_sqr(Context&, const OpArgs&);
Tensor* rebuild_sqrt(Context&, const OpArgs&);
Tensor* rebuild_silu(Context&, const OpArgs&);
Tensor* rebuild_gelu(Context&, const OpArgs&);
Tensor* rebuild_swiglu(Context&, const OpArgs&);
Tensor* rebuild_rms_norm(Context&, const OpArgs&);
Tensor* rebuild_norm(Context&, const OpArgs&);
Tensor* rebuild_soft_max(Context&, const OpArgs&);
Tensor* rebuild_rope(Context&, const OpArgs&);
Tensor* rebuild_sum_rows(Context&, const OpArgs&);
Tensor* rebuild_argmax(Context&, const OpArgs&);
Tensor* rebuild_argsort(Context&, const OpArgs&);
Tensor* rebuild_top_k(Context&, const OpArgs&);
Tensor* rebuild_mul_mat(Context&, const OpArgs&);
Tensor* rebuild_mul_mat_id(Context&, const OpArgs&);
Tensor* rebuild_get_rows(Context&, const OpArgs&);
Tensor* rebuild_set_rows(Context&, const OpArgs&);
Tensor* rebuild_cpy(Context&, const OpArgs&);
Tensor* rebuild_cont(Context&, const OpArgs&);
Tensor* rebuild_concat(Context&, const OpArgs&);
Tensor* rebuild_view(Context&, const OpArgs&);
Tensor* rebuild_reshape(Context&, const OpArgs&);
Tensor* rebuild_permute(Context&, const OpArgs&);
Tensor* rebuild_transpose(Context&, const OpArgs&);
Tensor* rebuild_gelu_erf(Context&, const OpArgs&);
Tensor* rebuild_sigmoid(Context&, const OpArgs&);
Tensor* rebuild_softcap(Context&, const OpArgs&);
Tensor* rebuild_rope_ext(Context&, const OpArgs&);
Tensor* rebuild_flash_attn(Context&, const OpArgs&);
Tensor* rebuild_routed_rows(Context&, const OpArgs&);
Tensor* rebuild_swiglu_oai(Context&, const OpArgs&);

void cost_per_element(const Tensor&, GraphCost&);  // one per element written (or read, for reductions)
void cost_product(const Tensor&, GraphCost&);      // K per output element (mul_mat, mul_mat_id)
void cost_sort(const Tensor&, GraphCost&);         // a comparison sort of every row of src[0]
void cost_set_rows(const Tensor&, GraphCost&);     // one per element of the rows written
void cost_attention(const Tensor&, GraphCost&);    // every (query row, head) reads all of k and v
}  // namespace detail

inline constexpr auto kCompute = OpKind::compute;
inline constexpr auto kView = OpKind::view;

// Indexed by Op. Columns: op, name, kind, min_src, max_src, minor, in_place,
// writes_src, rebuild, cost.
inline constexpr std::array<OpInfo, kOpCount> kOpRegistry = {{
    {Op::none, "none", OpKind::leaf, 0, 0, 0, false, -1, nullptr, nullptr},
    {Op::add, "add", kCompute, 2, 2, 0, true, -1, detail::rebuild_add, detail::cost_per_element},
    {Op::sub, "sub", kCompute, 2, 2, 0, true, -1, detail::rebuild_sub, detail::cost_per_element},
    {Op::mul, "mul", kCompute, 2, 2, 0, true, -1, detail::rebuild_mul, detail::cost_per_element},
    {Op::div, "div", kCompute, 2, 2, 0, true, -1, detail::rebuild_div, detail::cost_per_element},
    {Op::scale, "scale", kCompute, 1, 1, 0, true, -1, detail::rebuild_scale, detail::cost_per_element},
    {Op::sqr, "sqr", kCompute, 1, 1, 0, true, -1, detail::rebuild_sqr, detail::cost_per_element},
    {Op::sqrt, "sqrt", kCompute, 1, 1, 0, true, -1, detail::rebuild_sqrt, detail::cost_per_element},
    {Op::silu, "silu", kCompute, 1, 1, 0, true, -1, detail::rebuild_silu, detail::cost_per_element},
    {Op::gelu, "gelu", kCompute, 1, 1, 0, true, -1, detail::rebuild_gelu, detail::cost_per_element},
    {Op::swiglu, "swiglu", kCompute, 2, 2, 0, true, -1, detail::rebuild_swiglu, detail::cost_per_element},
    {Op::rms_norm, "rms_norm", kCompute, 1, 1, 0, true, -1, detail::rebuild_rms_norm, detail::cost_per_element},
    {Op::norm, "norm", kCompute, 1, 1, 0, true, -1, detail::rebuild_norm, detail::cost_per_element},
    // mask (src[1]) and sinks (src[2], 1.9) optional
    {Op::soft_max, "soft_max", kCompute, 1, 3, 0, true, -1, detail::rebuild_soft_max, detail::cost_per_element},
    {Op::rope, "rope", kCompute, 2, 2, 0, false, -1, detail::rebuild_rope, detail::cost_per_element},
    {Op::sum_rows, "sum_rows", kCompute, 1, 1, 0, false, -1, detail::rebuild_sum_rows, detail::cost_per_element},
    {Op::argmax, "argmax", kCompute, 1, 1, 0, false, -1, detail::rebuild_argmax, detail::cost_per_element},
    {Op::argsort, "argsort", kCompute, 1, 1, 0, false, -1, detail::rebuild_argsort, detail::cost_sort},
    {Op::top_k, "top_k", kCompute, 1, 1, 0, false, -1, detail::rebuild_top_k, detail::cost_sort},
    {Op::mul_mat, "mul_mat", kCompute, 2, 2, 0, false, -1, detail::rebuild_mul_mat, detail::cost_product},
    {Op::mul_mat_id, "mul_mat_id", kCompute, 3, 3, 0, false, -1, detail::rebuild_mul_mat_id, detail::cost_product},
    {Op::get_rows, "get_rows", kCompute, 2, 2, 0, false, -1, detail::rebuild_get_rows, detail::cost_per_element},
    {Op::set_rows, "set_rows", kCompute, 3, 3, 0, false, 0, detail::rebuild_set_rows, detail::cost_set_rows},
    {Op::cpy, "cpy", kCompute, 2, 2, 0, false, 1, detail::rebuild_cpy, detail::cost_per_element},
    {Op::cont, "cont", kCompute, 1, 1, 0, false, -1, detail::rebuild_cont, detail::cost_per_element},
    {Op::concat, "concat", kCompute, 2, 2, 0, false, -1, detail::rebuild_concat, detail::cost_per_element},
    {Op::view, "view", kView, 1, 1, 0, false, -1, detail::rebuild_view, nullptr},
    {Op::reshape, "reshape", kView, 1, 1, 0, false, -1, detail::rebuild_reshape, nullptr},
    {Op::permute, "permute", kView, 1, 1, 0, false, -1, detail::rebuild_permute, nullptr},
    {Op::transpose, "transpose", kView, 1, 1, 0, false, -1, detail::rebuild_transpose, nullptr},
    {Op::gelu_erf, "gelu_erf", kCompute, 1, 1, 2, true, -1, detail::rebuild_gelu_erf, detail::cost_per_element},
    {Op::sigmoid, "sigmoid", kCompute, 1, 1, 2, true, -1, detail::rebuild_sigmoid, detail::cost_per_element},
    {Op::softcap, "softcap", kCompute, 1, 1, 2, true, -1, detail::rebuild_softcap, detail::cost_per_element},
    // frequency factors (src[2]) optional
    {Op::rope_ext, "rope_ext", kCompute, 2, 3, 2, false, -1, detail::rebuild_rope_ext, detail::cost_per_element},
    // mask (src[3]) and sinks (src[4], never on the wire) optional
    {Op::flash_attn, "flash_attn", kCompute, 3, 5, 3, false, -1, detail::rebuild_flash_attn, detail::cost_attention},
    {Op::routed_rows, "routed_rows", kCompute, 2, 2, 7, false, -1, detail::rebuild_routed_rows,
     detail::cost_per_element},
    {Op::swiglu_oai, "swiglu_oai", kCompute, 2, 2, 9, false, -1, detail::rebuild_swiglu_oai,
     detail::cost_per_element},
}};

namespace detail {

constexpr bool same_name(const char* a, const char* b) { return std::string_view(a) == std::string_view(b); }

// Each rule a row must keep. A broken one reaches its throw, which is not a
// constant expression: the static_assert below fails to compile, and the
// compiler's message points at that throw. Row i is Op i (a missing row is
// value-initialised as `none`). Which rows have a rebuild and a cost is
// checked by tests/core/test_op_registry.cpp instead: GCC's
// -fsanitize=undefined makes comparing a function's address with null
// non-constant.
constexpr bool op_rows_are_consistent() {
  for (int i = 0; i < kOpCount; ++i) {
    const OpInfo& r = kOpRegistry[static_cast<size_t>(i)];
    if (static_cast<int>(r.op) != i) throw "a row is out of order or missing (row i must be Op i)";
    if (r.name == nullptr || r.name[0] == '\0') throw "a row has no name";
    for (int j = 0; j < i; ++j) {
      if (same_name(kOpRegistry[static_cast<size_t>(j)].name, r.name)) throw "two rows share a name";
    }
    if (r.min_src > r.max_src) throw "a row's sources are not min <= max";
    if ((r.kind == OpKind::leaf) != (r.op == Op::none)) throw "only none is a leaf";
    if (r.kind == OpKind::leaf && r.max_src != 0) throw "the leaf row has sources";
    if (r.kind != OpKind::leaf && r.min_src == 0) throw "a computing or view row requires no source";
    if (r.kind == OpKind::view && r.max_src != 1) throw "a view aliases exactly one source";
    if (r.in_place && (r.kind != OpKind::compute || r.writes_src >= 0)) {
      throw "an in-place op must compute, and not write into a source of its own";
    }
    if (r.writes_src >= r.max_src) throw "a row writes into a source it does not take";
    if (i > 0 && r.minor < kOpRegistry[static_cast<size_t>(i - 1)].minor) {
      throw "minors must not decrease: a new op is appended in a new protocol minor";
    }
  }
  return true;
}
static_assert(op_rows_are_consistent(), "kOpRegistry breaks a rule of op_rows_are_consistent()");

}  // namespace detail

// The row of op; op must be a value of Op (< kOpCount).
inline const OpInfo& op_info(Op op) { return kOpRegistry[static_cast<size_t>(op)]; }
inline bool op_is_known(int value) { return value >= 0 && value < kOpCount; }

const char* op_name(Op op);  // "unknown" for a value outside Op
inline bool op_is_view(Op op) { return op_is_known(static_cast<int>(op)) && op_info(op).kind == OpKind::view; }

// Ops a peer speaking minor version `minor` knows: 0 .. n-1, the rows whose
// minor is at most `minor` (minors never decrease along the table).
constexpr int ops_known_at(int minor) {
  int n = 0;
  while (n < kOpCount && kOpRegistry[static_cast<size_t>(n)].minor <= minor) ++n;
  return n;
}

}  // namespace weft
