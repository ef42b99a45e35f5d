// Cases chaining several ops into one graph, shaped like the pieces of a
// transformer layer: they exercise node ordering, views of intermediate
// results and writes that later nodes read.
#include <cmath>

#include "conformance/cases.h"
#include "weft/core/ops.h"

namespace weft::conformance {
namespace {

void add_mlp_chains(std::vector<Case>& cases) {
  // rms_norm -> mul -> mul_mat -> silu.
  for (DType w : kWeightTypes) {
    cases.push_back({"chain rms_norm>mul>mul_mat>silu " + dtype_str(w) + " [64,5,1,1]", [w](CaseBuilder& b) {
                       Context& ctx = b.ctx();
                       Tensor* x = b.input(DType::f32, {64, 5, 1, 1});
                       Tensor* n = ops::mul(ctx, ops::rms_norm(ctx, x, 1e-5f), b.input(DType::f32, {64, 1, 1, 1}));
                       Tensor* h = ops::mul_mat(ctx, b.input(w, {64, 48, 1, 1}), n);
                       b.output(ops::silu(ctx, h), matmul_tol(w));
                     }});
  }
  // A whole feed-forward block with a residual: x + Wd (silu(Wg n) * (Wu n)).
  for (DType w : {DType::f32, DType::f16, DType::q4_0}) {
    cases.push_back({"chain ffn " + dtype_str(w) + " [64,3,1,1] ff=96", [w](CaseBuilder& b) {
                       Context& ctx = b.ctx();
                       Tensor* x = b.input(DType::f32, {64, 3, 1, 1});
                       Tensor* n = ops::mul(ctx, ops::rms_norm(ctx, x, 1e-6f), b.input(DType::f32, {64, 1, 1, 1}));
                       Tensor* gate = ops::mul_mat(ctx, b.input(w, {64, 96, 1, 1}), n);
                       Tensor* up = ops::mul_mat(ctx, b.input(w, {64, 96, 1, 1}), n);
                       Tensor* down = ops::mul_mat(ctx, b.input(w, {96, 64, 1, 1}), ops::swiglu(ctx, gate, up));
                       b.output(ops::add(ctx, x, down), 5 * matmul_tol(w));
                     }});
  }
  // As a Q4_K_M file has it: gate and up in q4_K, down in q6_K, rows of 256.
  cases.push_back(
      {"chain ffn q4_K,q6_K [256,3,1,1] ff=512", [](CaseBuilder& b) {
         Context& ctx = b.ctx();
         Tensor* x = b.input(DType::f32, {256, 3, 1, 1});
         Tensor* n = ops::mul(ctx, ops::rms_norm(ctx, x, 1e-6f), b.input(DType::f32, {256, 1, 1, 1}));
         Tensor* gate = ops::mul_mat(ctx, b.input(DType::q4_K, {256, 512, 1, 1}), n);
         Tensor* up = ops::mul_mat(ctx, b.input(DType::q4_K, {256, 512, 1, 1}), n);
         Tensor* down = ops::mul_mat(ctx, b.input(DType::q6_K, {512, 256, 1, 1}), ops::swiglu(ctx, gate, up));
         b.output(ops::add(ctx, x, down), 5 * tol::kMatQuant);
       }});
  // Embedding lookup, norm, and logits against the same (tied) matrix.
  cases.push_back({"chain get_rows>rms_norm>mul_mat q4_0 [64,50,1,1]", [](CaseBuilder& b) {
                     Context& ctx = b.ctx();
                     Tensor* emb = b.input(DType::q4_0, {64, 50, 1, 1});
                     Tensor* tok = b.input(DType::i32, {4, 1, 1, 1}, indices(50));
                     Tensor* h = ops::rms_norm(ctx, ops::get_rows(ctx, emb, tok), 1e-5f);
                     b.output(ops::mul_mat(ctx, emb, h), tol::kMatQuant);
                   }});
  cases.push_back({"chain get_rows>rms_norm>mul_mat q6_K [256,50,1,1]", [](CaseBuilder& b) {
                     Context& ctx = b.ctx();
                     Tensor* emb = b.input(DType::q6_K, {256, 50, 1, 1});
                     Tensor* tok = b.input(DType::i32, {4, 1, 1, 1}, indices(50));
                     Tensor* h = ops::rms_norm(ctx, ops::get_rows(ctx, emb, tok), 1e-5f);
                     b.output(ops::mul_mat(ctx, emb, h), tol::kMatQuant);
                   }});
}

// Grouped-query attention: rope(q), rope(k), q.k, causal softmax, times v.
void attention(CaseBuilder& b, Tensor* k, Tensor* v, int64_t hd, int64_t n_head, int64_t n_tok, double tol) {
  Context& ctx = b.ctx();
  const int64_t n_kv = k->ne[2];
  Tensor* q = b.input(DType::f32, {hd, n_head, n_tok, 1});
  Tensor* qpos = b.input(DType::i32, {n_tok, 1, 1, 1}, indices(64));
  q = ops::rope(ctx, q, qpos, static_cast<int>(hd), RopeMode::neox, 10000.0f);
  Tensor* qp = ops::permute(ctx, q, 0, 2, 1, 3);  // [hd, n_tok, n_head]
  Tensor* kp = ops::permute(ctx, k, 0, 2, 1, 3);  // [hd, n_kv, n_head_kv]
  Tensor* scores = ops::mul_mat(ctx, kp, qp);     // [n_kv, n_tok, n_head]
  Tensor* mask = b.input(DType::f16, {n_kv, n_tok, 1, 1}, causal_mask(n_tok));
  Tensor* p = ops::soft_max(ctx, scores, mask, 1.0f / std::sqrt(static_cast<float>(hd)));
  Tensor* vt = ops::cont(ctx, ops::permute(ctx, v, 1, 2, 0, 3));  // [n_kv, hd, n_head_kv]
  Tensor* o = ops::mul_mat(ctx, vt, p);                           // [hd, n_tok, n_head]
  Tensor* merged = ops::cont(ctx, ops::permute(ctx, o, 0, 2, 1, 3));
  b.output(ops::reshape(ctx, merged, {hd * n_head, n_tok}), tol);
}

void add_attention_chains(std::vector<Case>& cases) {
  cases.push_back({"chain attention f32 hd=32 heads=4/2 tok=6 kv=8", [](CaseBuilder& b) {
                     Context& ctx = b.ctx();
                     Tensor* k = b.input(DType::f32, {32, 2, 8, 1});
                     Tensor* kpos = b.input(DType::i32, {8, 1, 1, 1}, indices(64));
                     k = ops::rope(ctx, k, kpos, 32, RopeMode::neox, 10000.0f);
                     attention(b, k, b.input(DType::f32, {32, 2, 8, 1}), 32, 4, 6, 1e-8);
                   }});
  // New keys and values written into f16 caches with set_rows, then read
  // back through views of the write: the reads must see the new rows.
  cases.push_back({"chain kv_cache f16 hd=16 heads=4/2 tok=3 kv=10", [](CaseBuilder& b) {
                     Context& ctx = b.ctx();
                     const int64_t hd = 16, hkv = 2, n_tok = 3, n_kv = 10;
                     Tensor* kcache = b.input(DType::f16, {hd * hkv, n_kv, 1, 1});
                     Tensor* vcache = b.input(DType::f16, {hd * hkv, n_kv, 1, 1});
                     Tensor* slots = b.input(DType::i32, {n_tok, 1, 1, 1}, distinct_indices(n_kv));
                     Tensor* knew = b.input(DType::f32, {hd * hkv, n_tok, 1, 1});
                     Tensor* vnew = b.input(DType::f32, {hd * hkv, n_tok, 1, 1});
                     Tensor* kw = ops::set_rows(ctx, kcache, knew, slots);
                     Tensor* vw = ops::set_rows(ctx, vcache, vnew, slots);
                     const size_t row = kw->nb[1];
                     Tensor* k = ops::view_3d(ctx, kw, hd, hkv, n_kv, 2 * hd, row, 0);
                     Tensor* v = ops::view_3d(ctx, vw, hd, hkv, n_kv, 2 * hd, row, 0);
                     // Attention reads f16 keys/values: cast to f32 for rope-free products.
                     Tensor* kf = ops::cpy(ctx, k, b.input(DType::f32, {hd, hkv, n_kv, 1}));
                     Tensor* vf = ops::cpy(ctx, v, b.input(DType::f32, {hd, hkv, n_kv, 1}));
                     attention(b, kf, vf, hd, 4, n_tok, 1e-5);
                     b.output(kw, kcache, storage_tol(DType::f16));
                   }});
}

void add_misc_chains(std::vector<Case>& cases) {
  // Mixture-of-experts routing: softmax, top_k, weights by get_rows, experts.
  for (DType w : {DType::f32, DType::q8_0}) {
    cases.push_back(
        {"chain moe " + dtype_str(w) + " experts=4 used=2 tok=3", [w](CaseBuilder& b) {
           Context& ctx = b.ctx();
           const int64_t k = 64, m = 32, n_exp = 4, n_used = 2, n_tok = 3;
           Tensor* x = b.input(DType::f32, {k, n_tok, 1, 1});
           Tensor* logits = ops::mul_mat(ctx, b.input(DType::f32, {k, n_exp, 1, 1}), x);
           Tensor* probs = ops::soft_max(ctx, logits, nullptr, 1.0f);
           Tensor* sel = ops::top_k(ctx, probs, static_cast<int>(n_used));
           Tensor* wts = ops::get_rows(ctx, ops::reshape(ctx, probs, {1, n_exp, n_tok}), sel);
           Tensor* h = ops::mul_mat_id(ctx, b.input(w, {k, m, n_exp, 1}), ops::reshape(ctx, x, {k, 1, n_tok}), sel);
           b.output(sel, 0.0);
           b.output(ops::mul(ctx, h, wts), matmul_tol(w));
         }});
  }
  // A write and a gather of the same rows in one graph.
  cases.push_back({"chain set_rows>get_rows f32 [32,6,1,1]", [](CaseBuilder& b) {
                     Context& ctx = b.ctx();
                     Tensor* cache = b.input(DType::f32, {32, 6, 1, 1});
                     Tensor* idx = b.input(DType::i32, {2, 1, 1, 1}, distinct_indices(6));
                     Tensor* w = ops::set_rows(ctx, cache, b.input(DType::f32, {32, 2, 1, 1}), idx);
                     Tensor* all = b.input(DType::i32, {6, 1, 1, 1}, indices(6));
                     b.output(ops::get_rows(ctx, w, all), tol::kExact);
                   }});
  cases.push_back(
      {"chain concat>norm>scale>sub f32 [12,3,2,1]", [](CaseBuilder& b) {
         Context& ctx = b.ctx();
         Tensor* c = ops::concat(ctx, b.input(DType::f32, {12, 3, 2, 1}), b.input(DType::f32, {12, 2, 2, 1}), 1);
         Tensor* n = ops::scale(ctx, ops::norm(ctx, c, 1e-5f), 0.5f);
         b.output(ops::sub(ctx, n, ops::sum_rows(ctx, c)), tol::kTranscend);
       }});
  cases.push_back({"chain f16 add>mul>gelu [33,4,1,1]", [](CaseBuilder& b) {
                     Context& ctx = b.ctx();
                     Tensor* s = ops::add(ctx, b.input(DType::f16, {33, 4, 1, 1}), b.input(DType::f16, {33, 4, 1, 1}));
                     Tensor* m = ops::mul(ctx, s, b.input(DType::f16, {33, 1, 1, 1}));
                     b.output(ops::gelu(ctx, m), 2e-5);  // three roundings to f16 along the way
                   }});
}

// The pieces the newer families add: Gemma 2's soft-capped scores and
// logits with a gelu_erf feed-forward, Qwen2-MoE's sigmoid-gated shared
// expert, and Llama 3.1's rope with frequency factors feeding attention.
void add_family_chains(std::vector<Case>& cases) {
  cases.push_back({"chain gemma2 scores>softcap>soft_max f32 [16,5,4,1] cap=50", [](CaseBuilder& b) {
                     Context& ctx = b.ctx();
                     Tensor* k = b.input(DType::f32, {32, 16, 4, 1});
                     Tensor* q = b.input(DType::f32, {32, 5, 4, 1}, uniform(-8.0f, 8.0f));
                     // Scores spread about 30: the cap bends them.
                     Tensor* scores = ops::scale(ctx, ops::mul_mat(ctx, k, q), 2.0f);
                     Tensor* capped = ops::softcap(ctx, scores, 50.0f);
                     Tensor* mask = b.input(DType::f16, {16, 5, 1, 1}, causal_mask(5));
                     b.output(ops::soft_max(ctx, capped, mask, 1.0f), tol::kTranscend);
                   }});
  for (DType w : {DType::f32, DType::q8_0}) {
    cases.push_back({"chain gemma ffn gelu_erf>logits softcap " + dtype_str(w) + " [64,3,1,1] ff=96",
                     [w](CaseBuilder& b) {
                       Context& ctx = b.ctx();
                       Tensor* x = b.input(DType::f32, {64, 3, 1, 1});
                       Tensor* gate = ops::mul_mat(ctx, b.input(w, {64, 96, 1, 1}), x);
                       Tensor* up = ops::mul_mat(ctx, b.input(w, {64, 96, 1, 1}), x);
                       Tensor* act = ops::mul(ctx, ops::gelu_erf(ctx, gate), up);
                       Tensor* down = ops::mul_mat(ctx, b.input(w, {96, 64, 1, 1}), act);
                       Tensor* logits = ops::mul_mat(ctx, b.input(DType::f32, {64, 40, 1, 1}), ops::add(ctx, x, down));
                       b.output(ops::softcap(ctx, ops::scale(ctx, logits, 4.0f), 30.0f), 5 * matmul_tol(w));
                     }});
  }
  cases.push_back({"chain qwen2moe shared expert sigmoid gate f32 [64,4,1,1]", [](CaseBuilder& b) {
                     Context& ctx = b.ctx();
                     Tensor* x = b.input(DType::f32, {64, 4, 1, 1});
                     Tensor* gate = ops::mul_mat(ctx, b.input(DType::f32, {64, 48, 1, 1}), x);
                     Tensor* up = ops::mul_mat(ctx, b.input(DType::f32, {64, 48, 1, 1}), x);
                     Tensor* act = ops::swiglu(ctx, gate, up);
                     Tensor* shared = ops::mul_mat(ctx, b.input(DType::f32, {48, 64, 1, 1}), act);
                     Tensor* g = ops::sigmoid(ctx, ops::mul_mat(ctx, b.input(DType::f32, {64, 1, 1, 1}), x));
                     b.output(ops::mul(ctx, shared, g), 5 * tol::kMatF32);
                   }});
  cases.push_back({"chain llama3.1 rope_ext q.k f32 hd=32 heads=4 tok=5", [](CaseBuilder& b) {
                     Context& ctx = b.ctx();
                     Tensor* ff = b.input(DType::f32, {16, 1, 1, 1}, uniform(1.0f, 8.0f));
                     Tensor* pos = b.input(DType::i32, {5, 1, 1, 1}, indices(1000));
                     auto rot = [&](Tensor* t) {
                       return ops::rope_ext(ctx, t, pos, ff, 32, RopeMode::normal, 500000.0f, {1.0f, 1.0f});
                     };
                     Tensor* q = ops::permute(ctx, rot(b.input(DType::f32, {32, 4, 5, 1})), 0, 2, 1, 3);
                     Tensor* k = ops::permute(ctx, rot(b.input(DType::f32, {32, 4, 5, 1})), 0, 2, 1, 3);
                     b.output(ops::mul_mat(ctx, k, q), 1e-7);
                   }});
}

}  // namespace

void add_chain_cases(std::vector<Case>& cases) {
  add_mlp_chains(cases);
  add_attention_chains(cases);
  add_misc_chains(cases);
  add_family_chains(cases);
}

}  // namespace weft::conformance
