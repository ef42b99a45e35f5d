// weft_fuzz_worker's SUPPORTS_OP questions (fuzz_structured.h lists the
// parts): a node of a random valid graph asked about as is, or with 1-3
// fields or bytes broken. A question that op_query.h rebuilds must get the
// CPU's own answer and leave the session usable; one it refuses must get
// ERROR invalid_input and a closed connection; a question broken at the
// byte level may get either. Nothing else (no answer, another frame, a
// crash) is allowed.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "fuzz_structured.h"
#include "protocol/messages.h"
#include "protocol/op_query.h"
#include "worker_wire.h"

namespace weft::rpc::fuzz {

using namespace wtest;

namespace {

int64_t odd_dim(Rng& rng, int64_t cur) {
  const int64_t v[] = {-1, 0, 1, 2, 3, 31, 32, 33, int64_t{1} << 32, int64_t{1} << 40, INT64_MAX, INT64_MIN};
  return chance(rng, 0.3) ? cur + pick(rng, -2, 2) : one_of(rng, v);
}
uint64_t odd_stride(Rng& rng, uint64_t cur) {
  const uint64_t v[] = {0, 1, 2, 4, 6, 34, 64, uint64_t{1} << 48, uint64_t{1} << 62, UINT64_MAX};
  return chance(rng, 0.3) ? cur * static_cast<uint64_t>(pick(rng, 0, 3)) : one_of(rng, v);
}

// One random change of a field of q; desc says which.
void mutate_field(SupportsOpRequest& q, Rng& rng, std::string& desc) {
  const int k = static_cast<int>(pick(rng, 0, 9));
  const int slot = static_cast<int>(pick(rng, 0, kWireSrc - 1));  // the request's sources, as the wire carries them
  const int d = static_cast<int>(pick(rng, 0, kMaxDims - 1));
  TensorLayout* l = k >= 6 && q.src[slot] ? &*q.src[slot] : &q.node;
  const std::string at = l == &q.node ? "node" : "src[" + std::to_string(slot) + "]";
  switch (k) {
    case 0: q.device = chance(rng, 0.5) ? kDevices : static_cast<uint32_t>(rng()); desc += " device"; break;
    case 1: q.op = static_cast<uint8_t>(pick(rng, 0, kOpCount + 2)); desc += " op=" + std::to_string(q.op); break;
    case 2: {
      const int32_t v[] = {0, 1, -1, 3, 4, 1000, INT32_MIN, INT32_MAX};
      q.op_params[pick(rng, 0, 3)] = one_of(rng, v);
      desc += " op_params";
      break;
    }
    case 3:
      if (q.src[slot]) {
        q.src[slot].reset();
        desc += " no src[" + std::to_string(slot) + "]";
      } else {
        q.src[slot] = q.node;
        desc += " extra src[" + std::to_string(slot) + "]";
      }
      break;
    case 4:
    case 6: l->dtype = static_cast<uint8_t>(pick(rng, 0, kDTypeCount + 1)); desc += " " + at + ".dtype"; break;
    case 5:
    case 7: l->ne[d] = odd_dim(rng, l->ne[d]); desc += " " + at + ".ne[" + std::to_string(d) + "]"; break;
    default: l->nb[d] = odd_stride(rng, l->nb[d]); desc += " " + at + ".nb[" + std::to_string(d) + "]"; break;
  }
}

}  // namespace

void run_support(Rng& rng, std::string& desc) {
  auto p = make_graph(rng, true);
  std::vector<const Tensor*> nodes;
  for (const Tensor* t : p->g.nodes()) {
    if (!op_is_view(t->op)) nodes.push_back(t);
  }
  if (nodes.empty()) return;
  const Tensor& n = *nodes[static_cast<size_t>(pick(rng, 0, static_cast<int64_t>(nodes.size()) - 1))];
  SupportsOpRequest q = SupportsOpRequest::of(static_cast<uint32_t>(pick(rng, 0, kDevices - 1)), n);
  desc += std::string("SUPPORTS_OP of ") + op_name(n.op) + " " + shape_string(n);
  const int how = static_cast<int>(pick(rng, 0, 9));  // 0-3 as is, 4-7 fields, 8-9 bytes
  for (int i = how >= 4 && how < 8 ? static_cast<int>(pick(rng, 1, 3)) : 0; i > 0; --i) mutate_field(q, rng, desc);
  Bytes payload = encoded(q).data();
  if (how >= 8) {
    if (chance(rng, 0.5)) {
      payload.resize(static_cast<size_t>(pick(rng, 0, static_cast<int64_t>(payload.size()) + 8)));
      desc += " resized to " + std::to_string(payload.size());
    } else {
      const size_t at = static_cast<size_t>(pick(rng, 0, static_cast<int64_t>(payload.size()) - 1));
      payload[at] = static_cast<uint8_t>(rng());
      desc += " byte " + std::to_string(at) + " changed";
    }
  }
  set_case_line(desc);
  // What the worker must say when the fields are intact: op_query.h's verdict, then the CPU's answer.
  // -1: no verdict; else 0 or 1. (A std::optional<bool> here draws GCC
  // 12's -Wmaybe-uninitialized false positive.)
  int want = -1;
  if (how < 8) {
    try {
      want = env->cpu0->supports_op(*rebuild_queried_node(q)->node) && q.device < kDevices ? 1 : 0;
    } catch (const Error& e) {
      // A node the client built itself must be accepted: refusing it would
      // end a session that holds a model's weights.
      if (how < 4) FAIL() << "op_query refuses a node the client builds: " << e.what();
      want = -1;
    }
    if (q.device >= kDevices) want = -1;
  }
  auto c = env->fresh();
  c->send(Cmd::supports_op, payload);
  const Frame f = c->recv();
  if (f.command == reply_code(Cmd::supports_op)) {
    if (f.payload.size() != 1 || f.payload[0] > 1) {
      ADD_FAILURE() << "[" << desc << "] a malformed answer of " << f.payload.size() << " bytes";
      return;
    }
    if (how < 8 && want < 0) ADD_FAILURE() << "[" << desc << "] answered a question op_query refuses";
    if (want >= 0 && (want == 1) != (f.payload[0] == 1)) ADD_FAILURE() << "[" << desc << "] answered " << int{f.payload[0]};
    c->ping();  // a question never ends the session
    ++g_stats.ran;
    return;
  }
  if (!f.is_error() || f.error_kind() != ErrorKind::invalid_input) {
    ADD_FAILURE() << "[" << desc << "] got frame " << f.command << " instead of an answer or ERROR invalid_input";
    return;
  }
  if (want >= 0) ADD_FAILURE() << "[" << desc << "] refused a valid question: " << f.error_message();
  if (!c->closed_by_peer()) ADD_FAILURE() << "[" << desc << "] session kept after " << f.error_message();
  ++g_stats.refused;
}

}  // namespace weft::rpc::fuzz
