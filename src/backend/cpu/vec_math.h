// The vector kernels of vec.h written once over an instruction-set wrapper V
// (vec_avx2.cpp: 8 lanes; vec_avx512.cpp: 16 lanes). Included only by those
// two files, after their wrapper: everything here has internal linkage
// (anonymous namespace), so code compiled for AVX-512 never becomes a
// shared (COMDAT) symbol that an AVX2-only caller could end up running.
//
// The wrapper V provides: F (float vector of N lanes), I (int32 vector), D
// (double vector of N/2 lanes) and MD (its lane mask); load/store/set1/set1i;
// add sub mul div fma(a,b,c)=a*b+c; min/max with the x86 rule (the second
// operand when either is NaN, so max(c, x) keeps a NaN x); sqrt; round (to
// nearest even); cvt_i; as_f/as_i (bit casts); addi subi srai/srli/slli<k>;
// and_ or_ xor_; table8/lookup8 (an 8-entry table, lanes indexed by their
// low 3 bits); swap_pairs and alternate_sign (rope); widen/narrow between F
// and two D; the D arithmetic (addd, muld, fmad, ...), ltd/selectd, shl52, rcp_estimate_d with
// kNewtonSteps, hsumd; and the f16/bf16 loads and stores.
//
// Accuracy (tests/cpu/test_vec_math.cpp: every 1000th f32 bit pattern and
// the specials, against float64): exp within 0.94 ulp; sigmoid, silu, gelu,
// gelu_erf, tanh and softcap within 0.55 ulp (computed in double, rounded
// once).
#pragma once

#include <cstdint>
#include <cstring>

namespace weft::cpu {
namespace {

template <class V>
struct VecMath {
  using F = typename V::F;
  using I = typename V::I;
  using D = typename V::D;

  // ------------------------------------------------------------ float exp

  // e^x in float (exp, soft_max): n = round(x / ln 2), r = x - n ln 2 in
  // [-0.35, 0.35] (Cody-Waite: ln2_hi has 9 bits, so n * ln2_hi is exact and
  // the first fma exact), e^r = 1 + u with u = r + r^2 q(r), q a degree-5 fit
  // of (e^r - 1 - r) / r^2 (relative error 5e-9), and 2^n applied as two
  // factors 2^n1 2^n2 (each a normal float for n in [-217, 129]), the second
  // last, so that a subnormal result is rounded once. x is clamped to
  // [-150, 89], beyond which the result is 0 or infinity; NaN stays NaN.
  static F exp(F x) {
    F m, s;
    exp_parts(x, V::set1(0.0f), m, s);
    return V::mul(m, s);
  }
  // e^(hi + lo) = m * s, s = 2^n2 (|lo| a few ulp of hi, or 0).
  static void exp_parts(F hi, F lo, F& m, F& s) {
    const F t = V::min(V::set1(89.0f), V::max(V::set1(-150.0f), hi));  // max(c, x) keeps a NaN x
    F n, u;
    exp_reduce(t, lo, n, u);
    const I ni = V::cvt_i(n);  // NaN gives some integer; u carries the NaN
    const I n1 = V::template srai<1>(ni);
    m = V::mul(V::add(u, V::set1(1.0f)), pow2(n1));
    s = pow2(V::subi(ni, n1));
  }
  // t + lo = n ln 2 + r, e^r = 1 + u.
  static void exp_reduce(F t, F lo, F& n, F& u) {
    n = V::round(V::mul(t, V::set1(1.44269504088896341f)));
    F r = V::fma(n, V::set1(-0.693359375f), t);
    r = V::add(V::fma(n, V::set1(2.12194440e-4f), r), lo);
    F q = V::set1(1.9738246919587255e-4f);
    q = V::fma(q, r, V::set1(1.3933851150795817e-3f));
    q = V::fma(q, r, V::set1(8.333578705787659e-3f));
    q = V::fma(q, r, V::set1(4.1666485369205475e-2f));
    q = V::fma(q, r, V::set1(1.666666567325592e-1f));
    q = V::fma(q, r, V::set1(0.5f));
    u = V::fma(V::mul(r, r), q, r);
  }

  // 2^k for k in [-126, 127].
  static F pow2(I k) { return V::as_f(V::template slli<23>(V::addi(k, V::set1i(127)))); }

  static F sign_of(F x) { return V::and_(x, V::set1(-0.0f)); }
  static F abs(F x) { return V::and_(x, V::as_f(V::set1i(0x7FFFFFFF))); }

  // ------------------------------------------- the double-precision cores
  //
  // tanh, softcap and gelu_erf are computed in double from the exact f32
  // input and rounded to f32 once: what is left is that rounding (0.5 ulp)
  // plus the cores' own error, a few 1e-9 relative. Subnormal f32 results
  // need no care: they are normal doubles, rounded once at the end.

  // (e^r - 1 - r) / r^2 for |r| <= 0.35: a degree-5 fit (mpmath chebyfit,
  // relative error 3.1e-9, so e^r = 1 + r + r^2 q and e^r - 1 = r + r^2 q
  // are within 5e-10).
  static D q_d(D r) {
    D q = V::setd(0.00019891969905683137);
    q = V::fmad(q, r, V::setd(0.001393453165508802));
    q = V::fmad(q, r, V::setd(0.008333310034706868));
    q = V::fmad(q, r, V::setd(0.04166645690406264));
    q = V::fmad(q, r, V::setd(0.16666666682523656));
    return V::fmad(q, r, V::setd(0.500000001427659));
  }
  // n = round(t / ln 2) and r = t - n ln 2 (fdlibm's Cody-Waite pair).
  static D reduce_d(D t, D& r) {
    const D n = V::roundd(V::muld(t, V::setd(1.4426950408889634)));
    r = V::fmad(n, V::setd(-6.93147180369123816490e-01), t);
    r = V::fmad(n, V::setd(-1.90821492927058770002e-10), r);
    return n;
  }
  // 2^n for an integral n in [-1022, 1023] in double: n + 1023 lands in the
  // low mantissa bits of n + (2^52 + 2^51 + 1023), which the shift moves
  // into the exponent field.
  static D pow2_d(D n) { return V::shl52(V::addd(n, V::setd(6755399441055744.0 + 1023.0))); }

  // e^t for t in [-200, 0] (the callers clamp; NaN stays NaN).
  static D exp_d(D t) {
    D r;
    const D n = reduce_d(t, r);
    return V::muld(V::addd(V::fmad(V::muld(r, r), q_d(r), r), V::setd(1.0)), pow2_d(n));
  }
  // e^y - 1 for y in [-40, 0]: 2^n (e^r - 1) + (2^n - 1), relative accuracy near 0.
  static D expm1_d(D y) {
    D r;
    const D n = reduce_d(y, r);
    const D u = V::fmad(V::muld(r, r), q_d(r), r);
    const D s = pow2_d(n);
    return V::fmad(s, u, V::subd(s, V::setd(1.0)));
  }
  // 1 / d for d in [1, 3]: the level's estimate refined by Newton steps to
  // a relative error under 2^-28 (AVX-512: 2^-14, one step; AVX2: 2^-12,
  // two).
  static D recip_d(D d) {
    D q = V::rcp_estimate_d(d);
    for (int i = 0; i < V::kNewtonSteps; ++i) q = V::fmad(q, V::fnmad(d, q, V::setd(1.0)), q);
    return q;
  }

  // tanh |v| = -u / (2 + u), u = e^(-2|v|) - 1 in (-1, 0]: no cancellation;
  // the sign bit cleared (u = 0 gives -0).
  static D tanh_abs_d(D v) {
    const D y = V::maxd(V::setd(-40.0), V::muld(V::ord(v, V::setd(-0.0)), V::setd(2.0)));
    const D u = expm1_d(y);
    const D t = V::muld(u, recip_d(V::addd(V::setd(2.0), u)));
    return V::andnotd(V::setd(-0.0), t);  // |-t|
  }

  // f applied to both double halves of x, rounded to f32 once.
  template <class Fn>
  static F in_double(F x, Fn f) {
    D lo, hi;
    V::widen(x, lo, hi);
    return V::narrow(f(lo), f(hi));
  }

  // ------------------------------------------------------------ sigmoids

  // x / (1 + e^-a) for a = ahi + alo (|alo| a few ulp of ahi, or 0), in f32
  // with the roundings of the denominator and the quotient compensated:
  //   a >= -80: e^-a = 2^n (1 + u) (exp_reduce; -a clamped below at -30,
  //     where 1 + e^-a is 1 in f32 anyway); d = 1 + 2^n + 2^n u is kept as
  //     dh + dl, dl holding the rounding errors of a = 1 + 2^n (Fast2Sum)
  //     and of dh = fma(2^n, u, a) (a - dh is exact, Sterbenz: |2^n u| <
  //     0.42 max(1, 2^n)); the quotient x / (dh + dl)
  //     from a reciprocal estimate, a Newton step, and one correction with
  //     the exact residual x - q dh - q dl.
  //   a < -80: x e^a (1 + e^a is 1 in f32) = x (1 + u) 2^n, x (1 + u) by one
  //     fma, 2^n in two factors so that a subnormal result is rounded once.
  //     Only computed when a lane needs it.
  // Error: the final rounding plus that of e^-a (~2^-25 relative): under
  // 1 ulp in the sweep. x = +-inf keeps the quotient's infinity (the
  // correction would be inf - inf).
  static F x_sigmoid(F x, F ahi, F alo) {
    const F t = V::min(V::set1(80.0f), V::max(V::set1(-30.0f), V::xor_(ahi, V::set1(-0.0f))));  // NaN kept
    F n, u;
    exp_reduce(t, V::xor_(alo, V::set1(-0.0f)), n, u);
    const F p = pow2(V::cvt_i(n));  // n in [-44, 116]
    const F big = V::max(p, V::set1(1.0f)), small = V::min(p, V::set1(1.0f));
    const F a = V::add(big, small);
    const F a_err = V::sub(small, V::sub(a, big));  // 1 + p = a + a_err
    const F dh = V::fma(p, u, a);
    const F dl = V::add(V::fma(p, u, V::sub(a, dh)), a_err);
    F y = V::rcp_estimate(dh);
    y = V::fma(y, V::fnma(dh, y, V::set1(1.0f)), y);
    const F q0 = V::mul(x, y);
    const F rho = V::fnma(q0, dl, V::fnma(q0, dh, x));
    const F q = V::select(V::lt(abs(q0), V::set1(__builtin_inff())), V::fma(rho, y, q0), q0);
    const auto tail = V::lt(ahi, V::set1(-80.0f));
    if (!V::any(tail)) return q;
    F nb, ub;  // e^a = 2^nb (1 + ub); x (1 + ub) rounded once, then 2^nb in two factors
    exp_reduce(V::max(V::set1(-150.0f), ahi), alo, nb, ub);
    const I ni = V::cvt_i(nb);
    const I n1 = V::template srai<1>(ni);
    const F xb = V::mul(V::fma(x, ub, x), pow2(n1));
    return V::select(tail, V::mul(xb, pow2(V::subi(ni, n1))), q);
  }

  static F sigmoid(F x) { return x_sigmoid(V::set1(1.0f), x, V::set1(0.0f)); }
  // x sigmoid(x). Below -150 the exact result underflows to -0, which the
  // clamped x gives too (x = -inf gives -0, not -inf * 0).
  static F silu(F x) {
    const F xc = V::max(V::set1(-150.0f), x);  // NaN kept
    return x_sigmoid(xc, xc, V::set1(0.0f));
  }
  // gelu (tanh form) = x sigmoid(a), a = 2 sqrt(2/pi) (x + 0.044715 x^3):
  // 0.5 (1 + tanh z) = sigmoid(2z), which does not cancel for negative x.
  // a is formed in double and passed as hi + lo: e^-a for |a| up to 80
  // needs a to about 1e-9 absolute, more than one float holds.
  static F gelu(F x) {
    D lo, hi;
    V::widen(x, lo, hi);
    auto arg = [](D v) {
      const D k1 = V::setd(1.5957691216057308), k3 = V::setd(1.5957691216057308 * 0.044715);
      const D a = V::muld(v, V::fmad(V::muld(k3, v), v, k1));
      return V::mind(V::setd(200.0), V::maxd(V::setd(-200.0), a));  // NaN kept
    };
    const D a_lo = arg(lo), a_hi = arg(hi);
    const F a = V::narrow(a_lo, a_hi);
    V::widen(a, lo, hi);
    const F a_rest = V::narrow(V::subd(a_lo, lo), V::subd(a_hi, hi));  // exact differences
    return x_sigmoid(V::max(V::set1(-150.0f), x), a, a_rest);
  }
  // silu(x) y with one more rounding.
  static F swiglu(F x, F y) { return V::mul(silu(x), y); }

  // ------------------------------------------------------------------ tanh

  static F tanh(F x) { return V::or_(in_double(x, tanh_abs_d), sign_of(x)); }
  // cap tanh(x / cap) with the quotient in double (x * (1/cap), relative
  // error 2^-52: tiny x keep their digits, huge ones cannot overflow).
  static F softcap(F x, D cap, D inv) {
    const F t = in_double(x, [cap, inv](D v) { return V::muld(cap, tanh_abs_d(V::muld(v, inv))); });
    return V::or_(t, sign_of(x));
  }

  // -------------------------------------------------------------- gelu_erf

  // Phi(-w) = 0.5 erfc(w / sqrt 2) = e^(-w^2/2) Q(w) for w >= 0, with Q on
  // [0, 15] in 8 pieces chosen by the exponent and top mantissa bit of w + 1
  // (w in [0,.5) [.5,1) [1,2) [2,3) [3,5) [5,7) [7,11) [11,15)), each a
  // degree-9 polynomial in d = w - mid (fitted with mpmath; relative error
  // under 3e-9 as stored). The terms from d^2 up are summed in f32 (they are
  // small next to c0 + c1 d); c0 and c1 are stored as f32 pairs and the last
  // two steps, e^(-w^2/2) (w^2 is exact in double) and the rest are in double:
  //   x <  0: x Phi(x) = x e^(-w^2/2) Q
  //   x >= 0: x (1 - Phi(-x)), Phi(-x) <= 0.5: no cancellation
  // Beyond |x| = 14.9 the negative side underflows to -0 (x is clamped).
  static F gelu_erf(F x) {
    const F w = V::min(V::set1(14.9f), abs(x));  // min(c, w) keeps a NaN w
    const I idx = V::subi(V::template srli<22>(V::as_i(V::add(w, V::set1(1.0f)))), V::set1i(254));
    auto coef = [idx](int k) { return V::lookup8(V::table8(kErfCoef[k]), idx); };
    const F mid = V::lookup8(V::table8(kErfMid), idx);
    const F d = V::sub(w, mid);
    F q = coef(11);
    for (int k = 10; k >= 4; --k) q = V::fma(q, d, coef(k));
    D xl, xh, wl, wh, ml, mh, ql, qh, c0l, c0h, c1l, c1h, t0l, t0h, t1l, t1h;
    V::widen(V::max(V::set1(-14.9f), x), xl, xh);
    V::widen(w, wl, wh);
    V::widen(mid, ml, mh);
    V::widen(q, ql, qh);
    V::widen(coef(0), c0l, c0h);
    V::widen(coef(1), t0l, t0h);
    V::widen(coef(2), c1l, c1h);
    V::widen(coef(3), t1l, t1h);
    auto half = [](D xv, D wv, D mv, D qv, D c0, D c1) {
      const D dv = V::subd(wv, mv);  // exact
      const D poly = V::fmad(dv, V::fmad(dv, qv, c1), c0);
      const D tail = V::muld(exp_d(V::muld(V::muld(wv, wv), V::setd(-0.5))), poly);  // Phi(-|x|)
      const D pos = V::subd(V::setd(1.0), tail);
      return V::muld(xv, V::selectd(V::ltd(xv, V::setd(0.0)), tail, pos));
    };
    return V::narrow(half(xl, wl, ml, ql, V::addd(c0l, t0l), V::addd(c1l, t1l)),
                     half(xh, wh, mh, qh, V::addd(c0h, t0h), V::addd(c1h, t1h)));
  }

  static constexpr float kErfMid[8] = {0.25f, 0.75f, 1.5f, 2.5f, 4.0f, 6.0f, 9.0f, 13.0f};
  // kErfCoef[row][piece]: c0 and c1 as high + low f32 pairs, then c2 ... c9,
  // the coefficients of d^k.
  static constexpr float kErfCoef[12][8] = {
      // c0, high part
      {0.41403210163116455f, 0.300232470035553f, 0.20578067004680634f, 0.14133132994174957f, 0.09441064298152924f,
       0.06477931141853333f, 0.043798789381980896f, 0.03050941415131092f},
      // c0, low part
      {1.316683762020432e-09f, -7.69557662039233e-09f, -3.0660511907143473e-09f, 1.4391230429566804e-09f,
       -1.664716475779926e-09f, 2.9064619599949992e-09f, -4.973271794384004e-10f, 3.442735541092645e-10f},
      // c1, high part
      {-0.29543426632881165f, -0.17376793920993805f, -0.09027127921581268f, -0.04561395198106766f,
       -0.02129971608519554f, -0.010266394354403019f, -0.004753180779516697f, -0.0023198919370770454f},
      // c1, low part
      {1.166437080257765e-08f, 5.563461691338034e-09f, -7.203188601145882e-10f, 3.101252241122232e-11f,
       8.891588021420205e-10f, -1.0042097708939934e-10f, 2.1453169796181726e-10f, -2.603609688955899e-11f},
      // c2
      {0.17008677124977112f, 0.08495325595140457f, 0.03518687188625336f, 0.01364822592586279f, 0.004605889320373535f,
       0.001590473810210824f, 0.00051008170703426f, 0.000175409484654665f},
      // c3
      {-0.08430418372154236f, -0.03668433055281639f, -0.012496990151703358f, -0.003831129288300872f,
       -0.0009587178938090801f, -0.00024118387955240905f, -5.414780753199011e-05f, -1.3189541277824901e-05f},
      // c4
      {0.03725269064307213f, 0.014360005035996437f, 0.004110368434339762f, 0.001017602626234293f,
       0.00019276041712146252f, 3.5842833312926814e-05f, 5.688213150278898e-06f, 9.863696277534473e-07f},
      // c5
      {-0.014998205006122589f, -0.005182866472750902f, -0.0012662988156080246f, -0.0002574258833192289f,
       -3.75409763364587e-05f, -5.225667337072082e-06f, -5.914307621424086e-07f, -7.336905127885984e-08f},
      // c6
      {0.005583344027400017f, 0.0017453610198572278f, 0.00036824753624387085f, 6.231851148186252e-05f,
       7.0827268245921005e-06f, 7.475239840459835e-07f, 6.064550461815088e-08f, 5.422903015528391e-09f},
      // c7
      {-0.0019430693937465549f, -0.0005533640505746007f, -0.0001018824041238986f, -1.4506677871395368e-05f,
       -1.3034978110226803e-06f, -1.0518471071918611e-07f, -6.184149192733912e-09f, -3.99167116027499e-10f},
      // c8
      {0.000646547123324126f, 0.00016837456496432424f, 2.801809569064062e-05f, 3.352784005983267e-06f,
       2.526708442474046e-07f, 1.5253661445058242e-08f, 6.933598140079766e-10f, 3.0861400240889125e-11f},
      // c9
      {-0.00020054542983416468f, -4.817481749341823e-05f, -7.0875212259124964e-06f, -7.26815585494478e-07f,
       -4.4093862783256554e-08f, -2.0749035822831274e-09f, -6.926879903002003e-11f, -2.247370692320949e-12f},
  };
};

// ------------------------------------------------------------------ loops

// out[i] = f(x[i]); a tail shorter than a vector goes through a padded
// buffer (its zero lanes are computed and dropped).
template <class V, class Fn>
inline void map1(const float* x, float* out, int64_t n, Fn f) {
  int64_t i = 0;
  for (; i + 2 * V::N <= n; i += 2 * V::N) {
    const typename V::F a = V::load(x + i), b = V::load(x + i + V::N);
    V::store(out + i, f(a));
    V::store(out + i + V::N, f(b));
  }
  for (; i + V::N <= n; i += V::N) V::store(out + i, f(V::load(x + i)));
  if (i < n) {
    alignas(64) float buf[V::N] = {};
    const size_t bytes = static_cast<size_t>(n - i) * sizeof(float);
    std::memcpy(buf, x + i, bytes);
    V::store(buf, f(V::load(buf)));
    std::memcpy(out + i, buf, bytes);
  }
}

// out[i] = f(x[i], y[i]).
template <class V, class Fn>
inline void map2(const float* x, const float* y, float* out, int64_t n, Fn f) {
  int64_t i = 0;
  for (; i + V::N <= n; i += V::N) V::store(out + i, f(V::load(x + i), V::load(y + i)));
  if (i < n) {
    alignas(64) float bx[V::N] = {}, by[V::N] = {};
    const size_t bytes = static_cast<size_t>(n - i) * sizeof(float);
    std::memcpy(bx, x + i, bytes);
    std::memcpy(by, y + i, bytes);
    V::store(bx, f(V::load(bx), V::load(by)));
    std::memcpy(out + i, bx, bytes);
  }
}

// sum of g(x[i]) in double, where g maps a float vector to a float vector
// whose lanes are summed (padded lanes are 0 in and must give 0 out).
template <class V, class Fn>
inline double reduce_sq(const float* x, int64_t n, Fn g) {
  using D = typename V::D;
  D acc0 = V::setd(0.0), acc1 = V::setd(0.0), acc2 = V::setd(0.0), acc3 = V::setd(0.0);
  int64_t i = 0;
  for (; i + 2 * V::N <= n; i += 2 * V::N) {
    D a, b, c, d;
    V::widen(g(V::load(x + i)), a, b);
    V::widen(g(V::load(x + i + V::N)), c, d);
    acc0 = V::fmad(a, a, acc0);
    acc1 = V::fmad(b, b, acc1);
    acc2 = V::fmad(c, c, acc2);
    acc3 = V::fmad(d, d, acc3);
  }
  for (; i < n; i += V::N) {
    alignas(64) float buf[V::N] = {};
    const int64_t k = n - i < V::N ? n - i : V::N;
    std::memcpy(buf, x + i, static_cast<size_t>(k) * sizeof(float));
    D a, b;
    V::widen(g(V::load(buf)), a, b);
    if (k < V::N) {  // the padded lanes of g's result must not count
      alignas(64) float gv[V::N];
      V::store(gv, V::narrow(a, b));
      for (int64_t j = k; j < V::N; ++j) gv[j] = 0.0f;
      V::widen(V::load(gv), a, b);
    }
    acc0 = V::fmad(a, a, acc0);
    acc1 = V::fmad(b, b, acc1);
  }
  return V::hsumd(V::addd(V::addd(acc0, acc1), V::addd(acc2, acc3)));
}

template <class V>
struct Kernels {
  using F = typename V::F;
  using D = typename V::D;
  using Math = VecMath<V>;

  static void exp(const float* x, float* out, int64_t n) {
    map1<V>(x, out, n, [](F v) { return Math::exp(v); });
  }
  static void tanh(const float* x, float* out, int64_t n) {
    map1<V>(x, out, n, [](F v) { return Math::tanh(v); });
  }
  static void sigmoid(const float* x, float* out, int64_t n) {
    map1<V>(x, out, n, [](F v) { return Math::sigmoid(v); });
  }
  static void silu(const float* x, float* out, int64_t n) {
    map1<V>(x, out, n, [](F v) { return Math::silu(v); });
  }
  static void gelu(const float* x, float* out, int64_t n) {
    map1<V>(x, out, n, [](F v) { return Math::gelu(v); });
  }
  static void gelu_erf(const float* x, float* out, int64_t n) {
    map1<V>(x, out, n, [](F v) { return Math::gelu_erf(v); });
  }
  static void sqr(const float* x, float* out, int64_t n) {
    map1<V>(x, out, n, [](F v) { return V::mul(v, v); });
  }
  static void sqrt(const float* x, float* out, int64_t n) {
    map1<V>(x, out, n, [](F v) { return V::sqrt(v); });
  }
  static void softcap(const float* x, float cap, float* out, int64_t n) {
    const D c = V::setd(cap), inv = V::setd(1.0 / cap);
    map1<V>(x, out, n, [c, inv](F v) { return Math::softcap(v, c, inv); });
  }
  static void scale(const float* x, float s, float* out, int64_t n) {
    const F sv = V::set1(s);
    map1<V>(x, out, n, [sv](F v) { return V::mul(v, sv); });
  }
  static void swiglu(const float* x, const float* y, float* out, int64_t n) {
    map2<V>(x, y, out, n, [](F a, F b) { return Math::swiglu(a, b); });
  }

  template <F (*Op)(F, F)>
  static void binary_op(const float* x, const float* y, float* out, int64_t n) {
    map2<V>(x, y, out, n, [](F a, F b) { return Op(a, b); });
  }
  template <F (*Op)(F, F)>
  static void scalar_op(const float* x, float y, float* out, int64_t n) {
    const F yv = V::set1(y);
    map1<V>(x, out, n, [yv](F v) { return Op(v, yv); });
  }

  static double sum(const float* x, int64_t n) {
    D acc0 = V::setd(0.0), acc1 = V::setd(0.0);
    int64_t i = 0;
    for (; i + V::N <= n; i += V::N) {
      D a, b;
      V::widen(V::load(x + i), a, b);
      acc0 = V::addd(acc0, a);
      acc1 = V::addd(acc1, b);
    }
    double total = V::hsumd(V::addd(acc0, acc1));
    for (; i < n; ++i) total += x[i];
    return total;
  }
  static double sum_sq(const float* x, int64_t n) {
    return reduce_sq<V>(x, n, [](F v) { return v; });
  }
  // x - mean as (x - mh) - ml with mean = mh + ml: exact when x is near the
  // mean (Sterbenz), where a float mean alone would lose the difference.
  static double sum_sq_dev(const float* x, double mean, int64_t n) {
    const float mh = static_cast<float>(mean);
    const F vh = V::set1(mh), vl = V::set1(static_cast<float>(mean - mh));
    return reduce_sq<V>(x, n, [vh, vl](F v) { return V::sub(V::sub(v, vh), vl); });
  }
  static void center_scale(const float* x, double mean, float s, float* out, int64_t n) {
    const float mh = static_cast<float>(mean);
    const F vh = V::set1(mh), vl = V::set1(static_cast<float>(mean - mh)), sv = V::set1(s);
    map1<V>(x, out, n, [vh, vl, sv](F v) { return V::mul(V::sub(V::sub(v, vh), vl), sv); });
  }

  static float scale_add_max(const float* x, float s, const float* m, float* out, int64_t n) {
    const F sv = V::set1(s);
    F mx = V::set1(-__builtin_inff());
    int64_t i = 0;
    for (; i + V::N <= n; i += V::N) {
      const F v = m != nullptr ? V::fma(V::load(x + i), sv, V::load(m + i)) : V::mul(V::load(x + i), sv);
      V::store(out + i, v);
      mx = V::max(v, mx);  // a NaN v leaves mx
    }
    alignas(64) float lanes[V::N];
    V::store(lanes, mx);
    float best = lanes[0];
    for (int j = 1; j < V::N; ++j) best = lanes[j] > best ? lanes[j] : best;
    for (; i < n; ++i) {
      const float v = m != nullptr ? __builtin_fmaf(x[i], s, m[i]) : x[i] * s;
      out[i] = v;
      best = v > best ? v : best;
    }
    return best;
  }
  static double exp_sum(const float* x, float sub, float* out, int64_t n) {
    const F sv = V::set1(sub);
    D acc0 = V::setd(0.0), acc1 = V::setd(0.0);
    int64_t i = 0;
    for (; i < n; i += V::N) {
      const int64_t k = n - i < V::N ? n - i : V::N;
      alignas(64) float buf[V::N];
      const float* src = x + i;
      if (k < V::N) {  // padded with -inf: e^-inf = 0 adds nothing
        for (int j = 0; j < V::N; ++j) buf[j] = j < k ? x[i + j] : -__builtin_inff();
        src = buf;
      }
      const F e = Math::exp(V::sub(V::load(src), sv));
      if (k < V::N) {
        V::store(buf, e);
        std::memcpy(out + i, buf, static_cast<size_t>(k) * sizeof(float));
      } else {
        V::store(out + i, e);
      }
      D a, b;
      V::widen(e, a, b);
      acc0 = V::addd(acc0, a);
      acc1 = V::addd(acc1, b);
    }
    return V::hsumd(V::addd(acc0, acc1));
  }

  static void rope_pairs(const float* x, const float* c, const float* s, float* out, int64_t n) {
    const F sign = V::as_f(V::alternate_sign());  // -0 in even lanes: -x[2i+1] s, +x[2i] s
    int64_t i = 0;
    for (; i + V::N <= n; i += V::N) {
      const F v = V::load(x + i);
      const F sw = V::xor_(V::swap_pairs(v), sign);
      V::store(out + i, V::fma(v, V::load(c + i), V::mul(sw, V::load(s + i))));
    }
    for (; i + 1 < n; i += 2) {
      const float x0 = x[i], x1 = x[i + 1];
      out[i] = __builtin_fmaf(x0, c[i], -x1 * s[i]);
      out[i + 1] = __builtin_fmaf(x0, s[i], x1 * c[i]);
    }
  }
  static void rope_halves(const float* x0, const float* x1, const float* c, const float* s, float* out0, float* out1,
                          int64_t n) {
    int64_t i = 0;
    for (; i + V::N <= n; i += V::N) {
      const F a = V::load(x0 + i), b = V::load(x1 + i), cv = V::load(c + i), sv = V::load(s + i);
      V::store(out0 + i, V::fma(a, cv, V::xor_(V::mul(b, sv), V::set1(-0.0f))));
      V::store(out1 + i, V::fma(a, sv, V::mul(b, cv)));
    }
    for (; i < n; ++i) {
      const float a = x0[i], b = x1[i];
      out0[i] = __builtin_fmaf(a, c[i], -(b * s[i]));
      out1[i] = __builtin_fmaf(a, s[i], b * c[i]);
    }
  }

  template <F (*Load)(const uint16_t*)>
  static void half_to_f32(const uint16_t* h, float* out, int64_t n) {
    int64_t i = 0;
    for (; i + V::N <= n; i += V::N) V::store(out + i, Load(h + i));
    if (i < n) {
      alignas(64) uint16_t hb[V::N] = {};
      alignas(64) float fb[V::N];
      std::memcpy(hb, h + i, static_cast<size_t>(n - i) * sizeof(uint16_t));
      V::store(fb, Load(hb));
      std::memcpy(out + i, fb, static_cast<size_t>(n - i) * sizeof(float));
    }
  }
  template <void (*Store)(uint16_t*, F)>
  static void f32_to_half(const float* x, uint16_t* out, int64_t n) {
    int64_t i = 0;
    for (; i + V::N <= n; i += V::N) Store(out + i, V::load(x + i));
    if (i < n) {
      alignas(64) float fb[V::N] = {};
      alignas(64) uint16_t hb[V::N];
      std::memcpy(fb, x + i, static_cast<size_t>(n - i) * sizeof(float));
      Store(hb, V::load(fb));
      std::memcpy(out + i, hb, static_cast<size_t>(n - i) * sizeof(uint16_t));
    }
  }

  static constexpr VecKernels table(const char* name) {
    return VecKernels{
        exp,
        tanh,
        sigmoid,
        silu,
        gelu,
        gelu_erf,
        sqr,
        sqrt,
        softcap,
        scale,
        swiglu,
        {binary_op<V::add>, binary_op<V::sub>, binary_op<V::mul>, binary_op<V::div>},
        {scalar_op<V::add>, scalar_op<V::sub>, scalar_op<V::mul>, scalar_op<V::div>},
        sum,
        sum_sq,
        sum_sq_dev,
        center_scale,
        scale_add_max,
        exp_sum,
        rope_pairs,
        rope_halves,
        half_to_f32<V::load_f16>,
        f32_to_half<V::store_f16>,
        half_to_f32<V::load_bf16>,
        f32_to_half<V::store_bf16>,
        name,
    };
  }
};

}  // namespace
}  // namespace weft::cpu
