// SUPPORTS_OP's node, rebuilt and checked like a received graph's tensor
// (docs/rpc-protocol.md sections 3a and 4).
#include "protocol/op_query.h"

#include <string>

#include "protocol/graph_codec.h"

namespace weft::rpc {
namespace {

constexpr unsigned __int128 kMaxExtent = static_cast<unsigned __int128>(1) << 62;

[[noreturn]] void query_fail(const std::string& what) { fail(ErrorKind::invalid_input, "rpc SUPPORTS_OP", what); }

// Appended piece by piece: GCC 12 misreads `"[" + std::string&&` as an
// overlapping copy (-Wrestrict).
std::string dims(const int64_t (&ne)[kMaxDims]) {
  std::string s = "[";
  for (int d = 0; d < kMaxDims; ++d) {
    if (d > 0) s += ',';
    s += std::to_string(ne[d]);
  }
  s += ']';
  return s;
}

// dtype known; ne non-negative and spanning at most 2^32 elements.
void check_layout(const TensorLayout& l, const std::string& which) {
  if (l.dtype >= kDTypeCount) query_fail(which + " dtype " + std::to_string(l.dtype) + " is unknown");
  int64_t nominal = 1;
  for (int d = 0; d < kMaxDims; ++d) {
    if (l.ne[d] < 0) query_fail(which + " ne " + dims(l.ne) + " has a negative dim");
    if (l.ne[d] > 1 && nominal > kMaxNominalElements / l.ne[d]) {
      query_fail(which + " ne " + dims(l.ne) + " spans more than 2^32 elements");
    }
    nominal *= l.ne[d] > 1 ? l.ne[d] : 1;
  }
}

// A source as the client's graph holds it: any strides (a view may permute
// or step over rows), but aligned to the element and addressing at most 2^62
// bytes, so that nothing a device derives from them can overflow.
Tensor* make_source(Context& ctx, const TensorLayout& l, int k) {
  const std::string which = "src[" + std::to_string(k) + "]";
  check_layout(l, which);
  const auto type = static_cast<DType>(l.dtype);
  const DTypeTraits& tr = traits(type);
  if (tr.quantized && l.ne[0] % tr.block_size != 0) {
    query_fail(which + " ne[0] " + std::to_string(l.ne[0]) + " is not a whole number of " + std::string(dtype_name(type)) +
               " blocks");
  }
  const size_t align = storage_alignment(type);
  unsigned __int128 extent = tr.unit_bytes;
  for (int d = 0; d < kMaxDims; ++d) {
    if (l.ne[d] <= 1) continue;
    if (l.nb[d] % align != 0) {
      query_fail(which + " nb[" + std::to_string(d) + "] " + std::to_string(l.nb[d]) + " is not a multiple of " +
                 std::to_string(align));
    }
    extent += static_cast<unsigned __int128>(l.ne[d] - 1) * l.nb[d];
  }
  if (extent > kMaxExtent) query_fail(which + " addresses more than 2^62 bytes");
  Tensor* t = nullptr;
  try {
    t = ctx.new_tensor(type, l.ne);
  } catch (const Error& e) {
    query_fail(which + ": " + e.what());
  }
  for (int d = 0; d < kMaxDims; ++d) t->nb[d] = static_cast<size_t>(l.nb[d]);
  t->name = which;
  return t;
}

}  // namespace

std::unique_ptr<QueriedNode> rebuild_queried_node(const SupportsOpRequest& q) {
  if (q.op >= kOpCount) query_fail("op " + std::to_string(q.op) + " is unknown");
  const auto op = static_cast<Op>(q.op);
  if (op == Op::none || op_is_view(op)) {
    query_fail(std::string("op ") + op_name(op) + " computes nothing: a worker is never asked to compute it");
  }
  check_layout(q.node, "node");
  auto out = std::make_unique<QueriedNode>();
  Tensor* src[kMaxSrc] = {};
  for (int k = 0; k < kWireSrc; ++k) {
    if (q.src[k]) src[k] = make_source(out->ctx, *q.src[k], k);
  }
  Tensor* t = nullptr;
  try {
    t = rebuild_op(out->ctx, op, q.op_params, q.node.ne, q.node.nb, 0, src);
  } catch (const Error& e) {
    query_fail(e.what());  // the constructor's message names the op
  }
  const auto type = static_cast<DType>(q.node.dtype);
  if (t->type != type) {
    query_fail(std::string(op_name(op)) + " dtype is " + std::string(dtype_name(type)) + ", but the op gives " + shape_string(*t));
  }
  for (int d = 0; d < kMaxDims; ++d) {
    if (t->ne[d] != q.node.ne[d] || t->nb[d] != q.node.nb[d]) {
      query_fail(std::string(op_name(op)) + " ne " + dims(q.node.ne) + " / nb[" + std::to_string(d) + "] " +
                 std::to_string(q.node.nb[d]) + " is not what the op gives: " + shape_string(*t) + " nb[" +
                 std::to_string(d) + "] " + std::to_string(t->nb[d]));
    }
  }
  for (int k = 0; k < kMaxSrc; ++k) {
    if (t->src[k] != src[k]) query_fail(std::string(op_name(op)) + " src[" + std::to_string(k) + "] is not what the op takes there");
  }
  t->name = "node";
  out->node = t;
  return out;
}

}  // namespace weft::rpc
