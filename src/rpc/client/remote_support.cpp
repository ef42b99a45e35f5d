// What a remote device computes. Two questions, kept apart:
//
// - What the protocol can carry is the client's to know: the worker's
//   validation (section 4) rejects a tensor of more than 2^32 elements (zero
//   dims counted as 1) or with data or strides not aligned to the element (4
//   bytes for f32/i32, 2 for f16, bf16 and the quantized blocks), although a
//   local device would run it. remote_unsendable() says so, supports_op()
//   refuses such a node and compute() refuses such a graph with
//   Error(unsupported) instead of a session the worker ends. Per-graph
//   limits (262144 tensors, 16 MiB encoded) are Error(unsupported) from
//   compute() as well. Tensor names are not sent.
// - What the device computes is the worker's device's to say: SUPPORTS_OP
//   (section 3a) asks it about one node, and the answer is cached per shape
//   class (SupportKey) on the connection, so a model's many layers cost one
//   round trip per distinct class and a graph evaluated again costs none.
#include <string>

#include "client/remote.h"
#include "protocol/graph_codec.h"

namespace weft::rpc {
namespace {

constexpr uint8_t kNoSource = 0xFF;

size_t element_alignment(DType type) { return storage_alignment(type); }

uint8_t layout_bits(const Tensor& t) {
  return static_cast<uint8_t>((t.rows_contiguous() ? 1 : 0) | (t.is_contiguous() ? 2 : 0));
}

}  // namespace

std::string remote_unsendable(const Tensor& t) {
  int64_t nominal = 1;
  for (int d = 0; d < kMaxDims; ++d) {
    if (t.ne[d] > 1 && nominal > kMaxNominalElements / t.ne[d]) return "spans more than 2^32 elements";
    nominal *= t.ne[d] > 1 ? t.ne[d] : 1;
  }
  const size_t align = element_alignment(t.type);
  for (int d = 0; d < kMaxDims; ++d) {
    if (t.ne[d] > 1 && t.nb[d] % align != 0) {
      return "nb[" + std::to_string(d) + "] " + std::to_string(t.nb[d]) + " is not a multiple of " +
             std::to_string(align);
    }
  }
  // Where the data starts: its address once placed (buffers are aligned),
  // else a view's offset into its root.
  const uint64_t start = t.data != nullptr ? reinterpret_cast<uintptr_t>(t.data) : t.view_offs;
  if (start % align != 0) return "data is not aligned to " + std::to_string(align) + " bytes";
  return {};
}

SupportKey SupportKey::of(uint32_t device, const Tensor& node) {
  SupportKey k;
  k.device = device;
  k.op = static_cast<uint8_t>(node.op);
  k.dtype = static_cast<uint8_t>(node.type);
  k.layout = layout_bits(node);
  for (int i = 0; i < kMaxSrc; ++i) {
    const Tensor* s = node.src[i];
    k.src_dtype[static_cast<size_t>(i)] = s != nullptr ? static_cast<uint8_t>(s->type) : kNoSource;
    k.src_layout[static_cast<size_t>(i)] = s != nullptr ? layout_bits(*s) : 0;
  }
  std::copy(std::begin(node.op_params), std::end(node.op_params), k.op_params.begin());
  return k;
}

bool Connection::supports_op(uint32_t device, const Tensor& t) {
  if (!has(kCapOpSupport)) return false;  // a 1.0 worker cannot say: it is given nothing to compute
  if (!knows_node(t)) return false;       // asking about a node newer than the worker would end the session
  const SupportKey key = SupportKey::of(device, t);
  {
    std::lock_guard lock(support_mu_);
    auto it = support_.find(key);
    if (it != support_.end()) return it->second;
  }
  // Asked outside support_mu_: the call waits for the worker under mu_.
  const bool yes = call(SupportsOpRequest::of(device, t)).supported;
  ++support_queries_;
  std::lock_guard lock(support_mu_);
  if (support_.size() >= kSupportCacheSize) support_.clear();  // only a caller minting classes gets here
  support_.emplace(key, yes);
  return yes;
}

bool RemoteDevice::supports_op(const Tensor& t) const {
  if (!remote_unsendable(t).empty()) return false;
  for (const Tensor* s : t.src) {
    if (s != nullptr && !remote_unsendable(*s).empty()) return false;
  }
  // A leaf or a view is sent as such and never computed by the worker
  // (section 4): the protocol carries every one, the device is not asked.
  if (t.op == Op::none || op_is_view(t.op)) return true;
  return connect()->supports_op(index_, t);
}

}  // namespace weft::rpc
