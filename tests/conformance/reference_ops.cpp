// The reference's op evaluators, in float64, straight from the semantics
// stated in include/weft/core/ops.h. Each computes the node's values in logical
// order and stores them; nothing here is optimised.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "conformance/reference.h"
#include "weft/core/error.h"

namespace weft::conformance {
namespace {

// Calls f(i0, i1, i2, i3) over ne in logical order (i0 fastest).
template <class F>
void for_each(const int64_t (&ne)[kMaxDims], F&& f) {
  for (int64_t i3 = 0; i3 < ne[3]; ++i3) {
    for (int64_t i2 = 0; i2 < ne[2]; ++i2) {
      for (int64_t i1 = 0; i1 < ne[1]; ++i1) {
        for (int64_t i0 = 0; i0 < ne[0]; ++i0) f(i0, i1, i2, i3);
      }
    }
  }
}

double silu(double x) {
  return x / (1.0 + std::exp(-x));
}

double gelu(double x) {
  const double c = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

double gelu_erf(double x) {
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// An i32 element as an index, checked against [0, n).
int64_t index_value(double v, int64_t n, const char* what) {
  const auto i = static_cast<int64_t>(v);
  if (static_cast<double>(i) != v || i < 0 || i >= n) {
    fail(ErrorKind::invalid_input, "reference",
         std::string(what) + " " + std::to_string(v) + " is outside [0, " + std::to_string(n) + ")");
  }
  return i;
}

}  // namespace

void Reference::eval(const Tensor& node) {
  const Tensor* s0 = node.src[0];
  const Tensor* s1 = node.src[1];
  const Tensor* s2 = node.src[2];
  const int64_t(&ne)[kMaxDims] = node.ne;
  std::vector<double> out;
  out.reserve(static_cast<size_t>(node.nelements()));

  switch (node.op) {
    case Op::add:
    case Op::sub:
    case Op::mul:
    case Op::div: {
      Accessor a = access(*s0), b = access(*s1);
      const int64_t* bn = s1->ne;
      for_each(ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const double x = a.at(i0, i1, i2, i3);
        const double y = b.at(i0 % bn[0], i1 % bn[1], i2 % bn[2], i3 % bn[3]);
        switch (node.op) {
          case Op::add: out.push_back(x + y); break;
          case Op::sub: out.push_back(x - y); break;
          case Op::mul: out.push_back(x * y); break;
          default: out.push_back(x / y); break;
        }
      });
      break;
    }
    case Op::scale:
    case Op::sqr:
    case Op::sqrt:
    case Op::silu:
    case Op::gelu:
    case Op::gelu_erf:
    case Op::sigmoid:
    case Op::softcap: {
      Accessor a = access(*s0);
      const double s = node.param_f32(0);  // scale's factor, softcap's cap
      for_each(ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const double x = a.at(i0, i1, i2, i3);
        switch (node.op) {
          case Op::scale: out.push_back(x * s); break;
          case Op::sqr: out.push_back(x * x); break;
          case Op::sqrt: out.push_back(std::sqrt(x)); break;
          case Op::silu: out.push_back(silu(x)); break;
          case Op::gelu_erf: out.push_back(gelu_erf(x)); break;
          case Op::sigmoid: out.push_back(sigmoid(x)); break;
          case Op::softcap: out.push_back(s * std::tanh(x / s)); break;
          default: out.push_back(gelu(x)); break;
        }
      });
      break;
    }
    case Op::swiglu: {
      Accessor a = access(*s0), b = access(*s1);
      for_each(ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        out.push_back(silu(a.at(i0, i1, i2, i3)) * b.at(i0, i1, i2, i3));
      });
      break;
    }
    case Op::swiglu_oai: {  // gpt-oss: x = min(a, limit), y = clamp(b, -limit, limit)
      Accessor a = access(*s0), b = access(*s1);
      const double alpha = node.param_f32(0), limit = node.param_f32(1);
      for_each(ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const double x = std::min(a.at(i0, i1, i2, i3), limit);
        const double y = std::clamp(b.at(i0, i1, i2, i3), -limit, limit);
        out.push_back(x / (1.0 + std::exp(-alpha * x)) * (y + 1.0));
      });
      break;
    }
    case Op::rms_norm:
    case Op::norm: {
      Accessor a = access(*s0);
      const double eps = node.param_f32(0);
      const int64_t one[kMaxDims] = {1, ne[1], ne[2], ne[3]};
      for_each(one, [&](int64_t, int64_t i1, int64_t i2, int64_t i3) {
        double mean = 0.0, sq = 0.0;
        for (int64_t i = 0; i < ne[0]; ++i) mean += a.at(i, i1, i2, i3);
        mean /= static_cast<double>(ne[0]);
        const double center = node.op == Op::norm ? mean : 0.0;
        for (int64_t i = 0; i < ne[0]; ++i) {
          const double d = a.at(i, i1, i2, i3) - center;
          sq += d * d;
        }
        const double inv = 1.0 / std::sqrt(sq / static_cast<double>(ne[0]) + eps);
        for (int64_t i = 0; i < ne[0]; ++i) out.push_back((a.at(i, i1, i2, i3) - center) * inv);
      });
      break;
    }
    case Op::soft_max: {
      Accessor a = access(*s0);
      Accessor m;
      if (s1 != nullptr) m = access(*s1);
      const double scale = node.param_f32(0);
      const int64_t one[kMaxDims] = {1, ne[1], ne[2], ne[3]};
      std::vector<double> row(static_cast<size_t>(ne[0]));
      for_each(one, [&](int64_t, int64_t i1, int64_t i2, int64_t i3) {
        double mx = -INFINITY;
        for (int64_t i = 0; i < ne[0]; ++i) {
          double v = a.at(i, i1, i2, i3) * scale;
          if (s1 != nullptr) v += m.at(i, i1, i2 % s1->ne[2], i3 % s1->ne[3]);
          row[i] = v;
          mx = std::max(mx, v);
        }
        // A sink: one more logit in the denominator, with no value.
        const Tensor* sinks = node.src[2];
        const double sink = sinks != nullptr ? access(*sinks).at(i2, 0, 0, 0) : -INFINITY;
        if (mx == -INFINITY) {  // every logit masked: zeros (the op's rule), sink or not
          for (size_t i = 0; i < row.size(); ++i) out.push_back(0.0);
          return;
        }
        double sum = std::exp(sink - mx);
        for (double& v : row) sum += (v = std::exp(v - mx));
        for (double v : row) out.push_back(v / sum);
      });
      break;
    }
    case Op::rope:
    case Op::rope_ext: {
      Accessor a = access(*s0), pos = access(*s1);
      const int64_t n_dims = node.param_i32(0);
      const bool neox = node.param_i32(1) == static_cast<int32_t>(RopeMode::neox);
      const double base = node.param_f32(2);
      const bool ext = node.op == Op::rope_ext;
      const double freq_scale = ext ? node.param_f32(3) : 1.0;
      const double attn = ext ? node.param_f32(4) : 1.0;
      std::vector<double> factors;  // rope_ext's per-pair divisors; 1 without them
      if (ext && s2 != nullptr) factors = values(*s2);
      const int64_t half = n_dims / 2;
      const int64_t one[kMaxDims] = {1, ne[1], ne[2], ne[3]};
      std::vector<double> row(static_cast<size_t>(ne[0]));
      for_each(one, [&](int64_t, int64_t i1, int64_t i2, int64_t i3) {
        const double p = pos.at(i2, 0, 0, 0);
        for (int64_t i = 0; i < ne[0]; ++i) row[i] = a.at(i, i1, i2, i3);
        for (int64_t i = 0; i < half; ++i) {
          const double ff = factors.empty() ? 1.0 : factors[static_cast<size_t>(i)];
          const double theta = p * freq_scale *
                               std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(n_dims)) / ff;
          const int64_t j0 = neox ? i : 2 * i;
          const int64_t j1 = neox ? i + half : 2 * i + 1;
          const double x0 = a.at(j0, i1, i2, i3), x1 = a.at(j1, i1, i2, i3);
          row[j0] = (x0 * std::cos(theta) - x1 * std::sin(theta)) * attn;
          row[j1] = (x0 * std::sin(theta) + x1 * std::cos(theta)) * attn;
        }
        out.insert(out.end(), row.begin(), row.end());
      });
      break;
    }
    case Op::sum_rows:
    case Op::argmax: {
      Accessor a = access(*s0);
      const int64_t* an = s0->ne;
      const int64_t one[kMaxDims] = {1, an[1], an[2], an[3]};
      for_each(one, [&](int64_t, int64_t i1, int64_t i2, int64_t i3) {
        double sum = 0.0, best = -INFINITY;
        int64_t arg = 0;
        for (int64_t i = 0; i < an[0]; ++i) {
          const double v = a.at(i, i1, i2, i3);
          sum += v;
          if (i == 0 || v > best) {  // strictly greater: the first maximum wins
            best = v;
            arg = i;
          }
        }
        out.push_back(node.op == Op::sum_rows ? sum : static_cast<double>(arg));
      });
      break;
    }
    case Op::argsort:
    case Op::top_k: {
      Accessor a = access(*s0);
      const int64_t* an = s0->ne;
      const bool desc = node.op == Op::top_k || node.param_i32(0) == static_cast<int32_t>(SortOrder::descending);
      const int64_t keep = node.op == Op::top_k ? node.param_i32(0) : an[0];
      const int64_t one[kMaxDims] = {1, an[1], an[2], an[3]};
      std::vector<int64_t> idx(static_cast<size_t>(an[0]));
      std::vector<double> row(static_cast<size_t>(an[0]));
      for_each(one, [&](int64_t, int64_t i1, int64_t i2, int64_t i3) {
        for (int64_t i = 0; i < an[0]; ++i) row[i] = a.at(i, i1, i2, i3);
        std::iota(idx.begin(), idx.end(), 0);
        // Stable: ties keep the lower index first.
        std::stable_sort(idx.begin(), idx.end(),
                         [&](int64_t x, int64_t y) { return desc ? row[x] > row[y] : row[x] < row[y]; });
        for (int64_t i = 0; i < keep; ++i) out.push_back(static_cast<double>(idx[i]));
      });
      break;
    }
    case Op::mul_mat: {
      Accessor a = access(*s0), b = access(*s1);
      const int64_t K = s0->ne[0];
      // Broadcast as in ggml: a's batch i2 / (B2 / A2) (consecutive b batches share an a batch).
      const int64_t r2 = s1->ne[2] / s0->ne[2], r3 = s1->ne[3] / s0->ne[3];
      for_each(ne, [&](int64_t m, int64_t n, int64_t i2, int64_t i3) {
        double sum = 0.0;
        for (int64_t k = 0; k < K; ++k) sum += a.at(k, m, i2 / r2, i3 / r3) * b.at(k, n, i2, i3);
        out.push_back(sum);
      });
      break;
    }
    case Op::mul_mat_id: {
      Accessor as = access(*s0), b = access(*s1), ids = access(*s2);
      const int64_t K = s0->ne[0], n_b = s1->ne[1], base = node.op_params[0];
      for_each(ne, [&](int64_t m, int64_t e, int64_t t, int64_t) {
        // A slice of experts (id_base): an id outside it gives zeros.
        const double id = ids.at(e, t, 0, 0) - static_cast<double>(base);
        if (base != 0 && (id < 0 || id >= static_cast<double>(s0->ne[2]))) {
          out.push_back(0.0);
          return;
        }
        const int64_t ex = index_value(id, s0->ne[2], "expert id");
        double sum = 0.0;
        for (int64_t k = 0; k < K; ++k) sum += as.at(k, m, ex, 0) * b.at(k, e % n_b, t, 0);
        out.push_back(sum);
      });
      break;
    }
    case Op::get_rows: {
      Accessor a = access(*s0), idx = access(*s1);
      for_each(ne, [&](int64_t k, int64_t i, int64_t j, int64_t) {
        const int64_t r = index_value(idx.at(i, j, 0, 0), s0->ne[1], "row index");
        out.push_back(a.at(k, r, j, 0));
      });
      break;
    }
    case Op::set_rows: {
      // src = {dst, rows, idx}; the node aliases dst, so start from dst's values.
      out = values(node);
      Accessor rows = access(*s1), idx = access(*s2);
      for (int64_t j = 0; j < s1->ne[2]; ++j) {
        for (int64_t i = 0; i < s1->ne[1]; ++i) {
          const int64_t r = index_value(idx.at(i, j, 0, 0), ne[1], "row index");
          for (int64_t k = 0; k < ne[0]; ++k) {
            out[static_cast<size_t>((j * ne[1] + r) * ne[0] + k)] = rows.at(k, i, j, 0);
          }
        }
      }
      break;
    }
    case Op::routed_rows: {
      // Column t of x when some ids[e, t] is in [first, first + count), else zeros.
      Accessor x = access(*s0), ids = access(*s1);
      const double first = node.param_i32(0), end = first + node.param_i32(1);
      for_each(ne, [&](int64_t k, int64_t t, int64_t, int64_t) {
        bool routed = false;
        for (int64_t e = 0; e < s1->ne[0]; ++e) routed = routed || (ids.at(e, t, 0, 0) >= first && ids.at(e, t, 0, 0) < end);
        out.push_back(routed ? x.at(k, t, 0, 0) : 0.0);
      });
      break;
    }
    case Op::cpy:
    case Op::cont:
      out = values(*s0);  // logical order in, logical order out
      break;
    case Op::concat: {
      Accessor a = access(*s0), b = access(*s1);
      const int dim = node.param_i32(0);
      const int64_t split = s0->ne[dim];
      for_each(ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        int64_t i[kMaxDims] = {i0, i1, i2, i3};
        if (i[dim] < split) {
          out.push_back(a.at(i[0], i[1], i[2], i[3]));
        } else {
          i[dim] -= split;
          out.push_back(b.at(i[0], i[1], i[2], i[3]));
        }
      });
      break;
    }
    case Op::flash_attn: {
      Accessor q = access(*s0), k = access(*s1), v = access(*s2);
      const Tensor* s3 = node.src[3];
      Accessor m;
      if (s3 != nullptr) m = access(*s3);
      const double scale = node.param_f32(0), cap = node.param_f32(1);
      const int64_t d = s0->ne[0], n_kv = s1->ne[1], group = s0->ne[2] / s1->ne[2];
      std::vector<double> p(static_cast<size_t>(n_kv));
      // out [Dv, H, n_q]: element (e, h, i)
      for (int64_t i = 0; i < ne[2]; ++i) {
        for (int64_t h = 0; h < ne[1]; ++h) {
          const int64_t g = h / group;
          double mx = -INFINITY;
          for (int64_t j = 0; j < n_kv; ++j) {
            double s = 0.0;
            for (int64_t e = 0; e < d; ++e) s += q.at(e, i, h, 0) * k.at(e, j, g, 0);
            s *= scale;
            if (cap > 0.0) s = cap * std::tanh(s / cap);
            if (s3 != nullptr) s += m.at(j, i, 0, 0);
            p[static_cast<size_t>(j)] = s;
            mx = std::max(mx, s);
          }
          double sum = 0.0;
          if (mx != -INFINITY)
            for (double& x : p) sum += (x = std::exp(x - mx));
          if (mx != -INFINITY && node.src[4] != nullptr) sum += std::exp(access(*node.src[4]).at(h, 0, 0, 0) - mx);
          for (int64_t e = 0; e < ne[0]; ++e) {
            double o = 0.0;
            if (mx != -INFINITY)
              for (int64_t j = 0; j < n_kv; ++j) o += p[static_cast<size_t>(j)] * v.at(e, j, g, 0);
            out.push_back(mx == -INFINITY ? 0.0 : o / sum);
          }
        }
      }
      break;
    }
    default: fail(ErrorKind::unsupported, "reference", std::string("no reference for op ") + op_name(node.op));
  }
  store(node, out);
}

}  // namespace weft::conformance
