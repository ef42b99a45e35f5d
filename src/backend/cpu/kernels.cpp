// The backend's entry points: one table from Op to the family that runs it.
#include "kernels.h"

#include <array>
#include <string>

#include "scratch.h"
#include "weft/core/error.h"

namespace weft::cpu {
namespace {

bool supports_always(const Tensor&) { return true; }
size_t no_scratch(const Tensor&, int) { return 0; }
void compute_nothing(const KernelContext&, Tensor&) {}

// The family of each op. No default: a new Op must be placed here. A missing
// one reaches the throw while kFamilies is built, which is not a constant
// expression, so it does not compile.
constexpr const OpFamily* family_for(Op op) {
  switch (op) {
    case Op::none:
    case Op::view:
    case Op::reshape:
    case Op::permute:
    case Op::transpose: return &kNoComputeFamily;
    case Op::add:
    case Op::sub:
    case Op::mul:
    case Op::div: return &kBinaryFamily;
    case Op::scale:
    case Op::sqr:
    case Op::sqrt:
    case Op::silu:
    case Op::gelu:
    case Op::gelu_erf:
    case Op::sigmoid:
    case Op::softcap: return &kUnaryFamily;
    case Op::swiglu: return &kSwigluFamily;
    case Op::swiglu_oai: return &kSwigluOaiFamily;
    case Op::rms_norm:
    case Op::norm: return &kNormFamily;
    case Op::soft_max: return &kSoftMaxFamily;
    case Op::rope:
    case Op::rope_ext: return &kRopeFamily;
    case Op::sum_rows:
    case Op::argmax: return &kReduceFamily;
    case Op::argsort:
    case Op::top_k: return &kSortFamily;
    case Op::mul_mat: return &kMulMatFamily;
    case Op::mul_mat_id: return &kMulMatIdFamily;
    case Op::get_rows: return &kGetRowsFamily;
    case Op::set_rows: return &kSetRowsFamily;
    case Op::routed_rows: return &kRoutedRowsFamily;
    case Op::cpy: return &kCpyFamily;
    case Op::cont: return &kContFamily;
    case Op::concat: return &kConcatFamily;
    case Op::flash_attn: return &kAttentionFamily;
  }
  throw "an Op has no CPU op family";
}

// Indexed by Op; built at compile time.
constexpr std::array<const OpFamily*, kOpCount> kFamilies = [] {
  std::array<const OpFamily*, kOpCount> table{};
  for (int i = 0; i < kOpCount; ++i) table[static_cast<size_t>(i)] = family_for(static_cast<Op>(i));
  return table;
}();

// nullptr for a value outside Op.
const OpFamily* find_family(Op op) {
  const auto i = static_cast<size_t>(op);
  return i < kFamilies.size() ? kFamilies[i] : nullptr;
}

}  // namespace

const OpFamily kNoComputeFamily{"none", supports_always, no_scratch, compute_nothing};

const OpFamily& op_family(Op op) {
  const OpFamily* f = find_family(op);
  if (f == nullptr) fail(ErrorKind::internal, "cpu kernels", "op value " + std::to_string(static_cast<int>(op)));
  return *f;
}

bool supports(const Tensor& node) {
  const OpFamily* f = find_family(node.op);
  return f != nullptr && f->supports(node);
}

size_t scratch_bytes(const Tensor& node, int nth) {
  return op_family(node.op).scratch_bytes(node, nth);
}

void compute_node(const KernelContext& kc, Tensor& node) {
  op_family(node.op).compute(kc, node);
}

void scratch_overflow(size_t wanted, size_t left) {
  fail(ErrorKind::internal, "cpu kernel scratch",
       "a kernel asked for " + std::to_string(wanted) + " bytes with " + std::to_string(left) +
           " left: scratch_bytes() undersized it");
}

}  // namespace weft::cpu
