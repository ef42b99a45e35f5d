// Constructors of the view ops. A view aliases its root (the first tensor
// in its view_src chain that owns memory); every view is checked to stay
// inside the root's bytes with overflow-safe arithmetic.
#include <cstdint>

#include "op_builder.h"
#include "weft/core/op_registry.h"
#include "weft/core/ops.h"

namespace weft::ops {
namespace {

using detail::require;
using detail::require_operand;

Tensor* root_of(Tensor* a) { return a->view_src ? a->view_src : a; }
size_t offset_in_root(const Tensor* a) { return a->view_src ? a->view_offs : 0; }

// A view tensor of a; ne/nb given; offset relative to a's data.
Tensor* make_view(Context& ctx, Op op, Tensor* a, const int64_t (&ne)[kMaxDims], const size_t (&nb)[kMaxDims],
                  size_t offset) {
  Tensor* root = root_of(a);
  Tensor* r = ctx.new_node();
  r->type = a->type;
  r->op = op;
  r->src[0] = a;
  r->view_src = root;
  for (int i = 0; i < kMaxDims; ++i) {
    require(ne[i] >= 0, op, "negative dim " + std::to_string(ne[i]));
    r->ne[i] = ne[i];
    r->nb[i] = nb[i];
  }
  const DTypeTraits& tr = traits(a->type);
  if (tr.quantized) {
    require(nb[0] == tr.unit_bytes && ne[0] % tr.block_size == 0, op,
            "a view of quantized " + shape_string(*a) + " must keep whole packed blocks in each row");
  }
  // The bytes the view spans (as Tensor::nbytes), with overflow checks.
  bool empty = false;
  for (int i = 0; i < kMaxDims; ++i) empty = empty || ne[i] == 0;
  size_t extent = tr.block_size == 1 ? tr.unit_bytes : 0;
  for (int i = 0; i < kMaxDims && !empty; ++i) {
    const auto steps = static_cast<size_t>(i == 0 && tr.block_size > 1 ? ne[0] / tr.block_size : ne[i] - 1);
    size_t span = 0;
    require(!__builtin_mul_overflow(steps, nb[i], &span) && !__builtin_add_overflow(extent, span, &extent), op,
            "stride " + std::to_string(nb[i]) + " of dim " + std::to_string(i) + " overflows");
  }
  const size_t base = offset_in_root(a);
  const size_t limit = root->nbytes();
  require(offset <= limit && base <= limit - offset, op, "offset " + std::to_string(offset) + " is outside " + shape_string(*root));
  const size_t start = base + offset;
  require(empty || extent <= limit - start, op,
          "view of " + std::to_string(extent) + " bytes at offset " + std::to_string(start) + " exceeds " +
              shape_string(*root) + " (" + std::to_string(limit) + " bytes)");
  r->view_offs = start;
  return r;
}

}  // namespace

Tensor* view(Context& ctx, Tensor* a, std::span<const int64_t> ne, std::span<const size_t> nb, size_t offset) {
  require_operand(a, Op::view, "a");
  require(!ne.empty() && ne.size() <= kMaxDims && nb.size() == ne.size(), Op::view,
          "needs 1 to 4 dims with one stride each, got " + std::to_string(ne.size()) + " and " + std::to_string(nb.size()));
  int64_t full_ne[kMaxDims] = {1, 1, 1, 1};
  size_t full_nb[kMaxDims];
  for (size_t i = 0; i < ne.size(); ++i) {
    full_ne[i] = ne[i];
    full_nb[i] = nb[i];
  }
  for (size_t i = ne.size(); i < kMaxDims; ++i) {
    full_nb[i] = full_nb[i - 1] * static_cast<size_t>(full_ne[i - 1] > 0 ? full_ne[i - 1] : 1);
  }
  return make_view(ctx, Op::view, a, full_ne, full_nb, offset);
}

Tensor* view_1d(Context& ctx, Tensor* a, int64_t ne0, size_t offset) {
  require_operand(a, Op::view, "a");
  const int64_t ne[] = {ne0};
  const size_t nb[] = {traits(a->type).unit_bytes};
  return view(ctx, a, ne, nb, offset);
}

Tensor* view_2d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset) {
  require_operand(a, Op::view, "a");
  const int64_t ne[] = {ne0, ne1};
  const size_t nb[] = {traits(a->type).unit_bytes, nb1};
  return view(ctx, a, ne, nb, offset);
}

Tensor* view_3d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1, size_t nb2,
                size_t offset) {
  require_operand(a, Op::view, "a");
  const int64_t ne[] = {ne0, ne1, ne2};
  const size_t nb[] = {traits(a->type).unit_bytes, nb1, nb2};
  return view(ctx, a, ne, nb, offset);
}

Tensor* reshape(Context& ctx, Tensor* a, std::span<const int64_t> ne) {
  constexpr Op op = Op::reshape;
  require_operand(a, op, "a");
  require(a->is_contiguous(), op, shape_string(*a) + " is not contiguous");
  require(!ne.empty() && ne.size() <= kMaxDims, op, std::to_string(ne.size()) + " dims (1 to 4 allowed)");
  Tensor shape;  // packed layout of the new shape, for its strides
  shape.type = a->type;
  int64_t count = 1;
  for (size_t i = 0; i < ne.size(); ++i) {
    require(ne[i] >= 0 && (ne[i] == 0 || count <= INT64_MAX / ne[i]), op, "bad dim " + std::to_string(ne[i]));
    shape.ne[i] = ne[i];
    count *= ne[i];
  }
  require(count == a->nelements(), op, "cannot reshape " + shape_string(*a) + " to " + shape_string(shape));
  require(shape.ne[0] % traits(a->type).block_size == 0, op, "row of " + shape_string(shape) + " splits a block");
  set_packed_strides(shape);
  return make_view(ctx, op, a, shape.ne, shape.nb, 0);
}

Tensor* reshape(Context& ctx, Tensor* a, std::initializer_list<int64_t> ne) {
  return reshape(ctx, a, std::span<const int64_t>(ne.begin(), ne.size()));
}

Tensor* permute(Context& ctx, Tensor* a, int ax0, int ax1, int ax2, int ax3) {
  constexpr Op op = Op::permute;
  require_operand(a, op, "a");
  const int axes[kMaxDims] = {ax0, ax1, ax2, ax3};
  bool seen[kMaxDims] = {};
  for (int ax : axes) {
    require(ax >= 0 && ax < kMaxDims && !seen[ax], op,
            "axes " + std::to_string(ax0) + "," + std::to_string(ax1) + "," + std::to_string(ax2) + "," +
                std::to_string(ax3) + " are not a permutation");
    seen[ax] = true;
  }
  require(!traits(a->type).quantized || ax0 == 0, op, "cannot move the row dim of quantized " + shape_string(*a));
  int64_t ne[kMaxDims];
  size_t nb[kMaxDims];
  for (int i = 0; i < kMaxDims; ++i) {
    ne[axes[i]] = a->ne[i];
    nb[axes[i]] = a->nb[i];
  }
  Tensor* r = make_view(ctx, op, a, ne, nb, 0);
  for (int i = 0; i < kMaxDims; ++i) r->set_param_i32(i, axes[i]);
  return r;
}

Tensor* transpose(Context& ctx, Tensor* a) {
  require_operand(a, Op::transpose, "a");
  require(!traits(a->type).quantized, Op::transpose, "cannot transpose quantized " + shape_string(*a));
  Tensor* r = permute(ctx, a, 1, 0, 2, 3);
  r->op = Op::transpose;
  return r;
}

}  // namespace weft::ops

// Rebuild adapters (weft/core/op_registry.h): the constructors above applied
// to a received node's sources and parameters.
namespace weft::detail {

// A view's wire layout is its own (ne, nb, view_offs from the root); the
// constructor takes an offset from its source a.
Tensor* rebuild_view(Context& c, const OpArgs& a) {
  Tensor* src = a.src[0];
  if (src == nullptr) fail(ErrorKind::invalid_input, "view", "missing operand a");
  const uint64_t base = src->view_src != nullptr ? src->view_offs : 0;
  if (a.view_offs < base) {
    fail(ErrorKind::invalid_input, "view",
         "view_offs " + std::to_string(a.view_offs) + " is before its source's start " + std::to_string(base) +
             " in the root");
  }
  const size_t sizes[kMaxDims] = {a.nb[0], a.nb[1], a.nb[2], a.nb[3]};
  return ops::view(c, src, std::span<const int64_t>(a.ne, kMaxDims), sizes, a.view_offs - base);
}

Tensor* rebuild_reshape(Context& c, const OpArgs& a) {
  return ops::reshape(c, a.src[0], std::span<const int64_t>(a.ne, kMaxDims));
}
Tensor* rebuild_permute(Context& c, const OpArgs& a) { return ops::permute(c, a.src[0], a.i32(0), a.i32(1), a.i32(2), a.i32(3)); }
Tensor* rebuild_transpose(Context& c, const OpArgs& a) { return ops::transpose(c, a.src[0]); }

}  // namespace weft::detail
