// One eval's graph, as the executor keeps it (internal to executor*.cpp).
#pragma once

#include <algorithm>
#include <cstdint>

#include "weft/core/context.h"
#include "weft/core/graph.h"
#include "weft/runtime/executor.h"

namespace weft {
namespace detail {

// The KV length a graph reads: n_kv rounded up to a multiple of 32 (at most
// n_ctx), masked beyond n_kv, so that consecutive tokens build graphs of the
// same shape and a worker's graph cache hits 31 times out of 32.
inline int64_t padded_kv(int64_t n_kv, int64_t n_ctx) {
  constexpr int64_t kPad = 32;
  return std::min(n_ctx, (n_kv + kPad - 1) / kPad * kPad);
}

}  // namespace detail

// Its inputs and its logits, an output [n_vocab, n] (or [n_vocab, 1]). It
// depends only on the token count, the (padded) KV length and the logit
// rows: positions, masks and token ids are inputs, so the graph serves
// every eval of that shape (Executor::graph_for keeps the last).
struct Executor::EvalGraph {
  Context ctx;
  Graph g;
  int64_t n;
  int64_t n_kv;
  model::LogitRows rows;
  int64_t n_out;  // > 0: a batch's graph (out_rows)
  model::LlamaModel::Inputs in;
  model::LlamaModel::Forward forward;
  Tensor* logits;

  EvalGraph(const model::LlamaModel& m, int64_t n_tokens, int64_t kv, model::LogitRows logit_rows, int64_t n_out_rows)
      : n(n_tokens),
        n_kv(kv),
        rows(logit_rows),
        n_out(n_out_rows),
        in(m.new_inputs(ctx, n_tokens, kv, n_out_rows)),
        forward(m.build_forward(ctx, g, in, kv - n_tokens, logit_rows)),
        logits(forward.logits) {
    logits->flags |= kFlagOutput;
  }
};

}  // namespace weft
