// AVX-512 kernels of the quantized dot products (qdot.h). Types without an
// entry here use the generic kernel.
#include "qdot.h"

namespace weft::cpu {

const QuantDotTable& avx512_quant_table() {
  static constexpr QuantDotTable kTable{};
  return kTable;
}

}  // namespace weft::cpu
