// Multi-head latent attention, as LlamaModel::build_attention adds it for a
// model with LlamaParams::mla() (DeepSeek-V2/V3).
#pragma once

#include "weft/core/context.h"
#include "weft/model/model.h"

namespace weft::model::detail {

// The attention output f32 [n_embd, n] of cur f32 [n_embd, n] (the
// normalized input) at in.positions: writes each token's latent row into
// l.k_cache ([n_lora_kv + n_rot, n_ctx, 1]) at in.kv_rows and attends over
// rows [0, in.mask->ne[0]) with in.mask, by flash_attn when fused, else by
// the unfused products and soft_max.
Tensor* build_mla_attention(Context& ctx, const LlamaParams& p, const LlamaLayer& l, Tensor* cur,
                            const LlamaModel::Inputs& in, bool fused);

}  // namespace weft::model::detail
