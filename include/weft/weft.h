// weft: one model across many machines. Everything a program that runs
// models needs; finer-grained headers are in the layer folders:
//
//   weft/core/      dtypes, tensors, ops and their shape rules, graphs, errors
//   weft/backend/   device and backend interfaces, the CPU device, the graph
//                   allocator, the multi-backend scheduler
//   weft/rpc/       remote devices (client.h) and the worker (worker.h)
//   weft/gguf/      GGUF files
//   weft/model/     llama-family models, tokenizers, sampling, perplexity,
//                   quantization, the demo model
//   weft/runtime/   device specs, placement, the executor, Session (load, generate, ...)
//   weft/testing/   what tests and `weft check` use: the asynchronous test device
//   weft/version.h  the library's version and build
//
//   #include <weft/weft.h>
//   weft::Session s({.model = "model.gguf", .devices = {"cpu", "rpc://10.0.0.2:50052"}});
//   s.load(512);
#pragma once

#include "weft/backend/backend.h"
#include "weft/backend/cpu.h"
#include "weft/backend/sched.h"
#include "weft/core/error.h"
#include "weft/core/ops.h"
#include "weft/gguf/gguf.h"
#include "weft/model/model.h"
#include "weft/model/perplexity.h"
#include "weft/model/quantize.h"
#include "weft/model/sampler.h"
#include "weft/model/tokenizer.h"
#include "weft/rpc/client.h"
#include "weft/rpc/discovery.h"
#include "weft/rpc/worker.h"
#include "weft/runtime/devices.h"
#include "weft/runtime/executor.h"
#include "weft/runtime/generate.h"
#include "weft/runtime/placement.h"
#include "weft/runtime/session.h"
#include "weft/version.h"
