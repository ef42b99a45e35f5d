/* The standard engine's decode product, timed as `weft bench ops` times
 * weft's (docs/performance.md, "Against the standard engine's kernels"):
 * ggml's CPU backend computing mul_mat(W, x), x one f32 column of 4096, as
 * llama.cpp runs it: W in the CPU device's extra buffer type when that
 * takes it (ggml repacks q4_0, q4_K and iq4_nl rows into interleaved
 * blocks there; the log says "repack"), else a plain CPU buffer. Printed
 * as GB/s of weights read, with W in L2 (512 KiB per thread, half of a 1 MiB L2; 16
 * products a graph) and from memory (256 MiB, one product a graph), the two
 * rows `weft bench ops --filter "matvec TYPE"` prints for weft.
 *
 * Not part of weft's build: it is compiled against a ggml checkout, once
 * per SIMD level (GGML_NATIVE=ON for this CPU's widest; for AVX2 only,
 * -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON
 * -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF):
 *
 *   cmake -S ggml -B /tmp/g -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
 *       -DBUILD_SHARED_LIBS=OFF -DGGML_OPENMP=OFF -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF
 *   ninja -C /tmp/g
 *   g++ -O2 -std=c++17 -Iggml/include bench/reference/ggml_decode_product.cpp \
 *       /tmp/g/src/libggml.a /tmp/g/src/libggml-cpu.a /tmp/g/src/libggml-base.a -lpthread -o ggml_decode_product
 *   ./ggml_decode_product TYPE [THREADS] */
#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpu.h>
#include <ggml.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

constexpr int64_t kCols = 4096;

struct Product {
  ggml_backend_t backend = nullptr;
  ggml_context* weights = nullptr;
  ggml_context* graph_ctx = nullptr;
  ggml_backend_buffer_t weight_buffer = nullptr;
  ggml_backend_buffer_t graph_buffer = nullptr;
  ggml_cgraph* graph = nullptr;
  bool repacked = false;

  ~Product() {
    if (weight_buffer) ggml_backend_buffer_free(weight_buffer);
    if (graph_buffer) ggml_backend_buffer_free(graph_buffer);
    if (weights) ggml_free(weights);
    if (graph_ctx) ggml_free(graph_ctx);
    if (backend) ggml_backend_free(backend);
  }
};

// W in the first extra buffer type whose device takes the product, as
// llama.cpp's loader places weights; else a plain CPU buffer.
void place_weights(Product& p, ggml_tensor* product) {
  ggml_backend_dev_t dev = ggml_backend_get_device(p.backend);
  auto extra = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
      ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(dev), "ggml_backend_dev_get_extra_bufts"));
  for (ggml_backend_buffer_type_t* b = extra ? extra(dev) : nullptr; b && *b; ++b) {
    ggml_backend_buffer_t buffer = ggml_backend_alloc_ctx_tensors_from_buft(p.weights, *b);
    if (!buffer) continue;
    if (ggml_backend_dev_supports_op(dev, product)) {
      p.weight_buffer = buffer;
      p.repacked = true;
      return;
    }
    ggml_backend_buffer_free(buffer);
    for (ggml_tensor* t = ggml_get_first_tensor(p.weights); t; t = ggml_get_next_tensor(p.weights, t)) {
      t->buffer = nullptr;  // placed in the freed buffer: placed again below
      t->data = nullptr;
    }
  }
  p.weight_buffer = ggml_backend_alloc_ctx_tensors(p.weights, p.backend);
}

// GB/s of weights read by `products` products of [kCols, rows] weights.
double time_products(ggml_type type, int64_t rows, int products, int threads, bool* repacked) {
  Product p;
  p.backend = ggml_backend_cpu_init();
  ggml_backend_cpu_set_n_threads(p.backend, threads);
  const ggml_init_params params = {ggml_tensor_overhead() * 64 + ggml_graph_overhead(), nullptr, true};
  p.weights = ggml_init(params);
  p.graph_ctx = ggml_init(params);
  ggml_tensor* w = ggml_new_tensor_2d(p.weights, type, kCols, rows);
  ggml_tensor* x = ggml_new_tensor_2d(p.graph_ctx, GGML_TYPE_F32, kCols, 1);
  p.graph = ggml_new_graph(p.graph_ctx);
  for (int i = 0; i < products; ++i) ggml_build_forward_expand(p.graph, ggml_mul_mat(p.graph_ctx, w, x));
  place_weights(p, ggml_graph_node(p.graph, 0));
  p.graph_buffer = ggml_backend_alloc_ctx_tensors(p.graph_ctx, p.backend);
  *repacked = p.repacked;

  // 64 distinct rows quantized once and repeated, as weft's bench fills its weights.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(kCols * 64);
  for (float& v : values) v = dist(rng);
  const size_t row = ggml_row_size(type, kCols);
  std::vector<uint8_t> block(row * 64), all(row * rows);
  ggml_quantize_chunk(type, values.data(), block.data(), 0, 64, kCols, nullptr);
  for (int64_t r = 0; r < rows; r += 64)
    std::memcpy(all.data() + r * row, block.data(), row * std::min<int64_t>(64, rows - r));
  ggml_backend_tensor_set(w, all.data(), 0, all.size());
  std::vector<float> xv(kCols);
  for (float& v : xv) v = dist(rng);
  ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * sizeof(float));

  ggml_backend_graph_compute(p.backend, p.graph);  // warm pages, threads, repacked weights
  double best = 1e30;
  const int reps = products > 1 ? 200 : 3;
  for (int round = 0; round < 7; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) ggml_backend_graph_compute(p.backend, p.graph);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps);
  }
  return products * static_cast<double>(row) * static_cast<double>(rows) / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: ggml_decode_product TYPE [THREADS]\n");
    return 2;
  }
  ggml_cpu_init();
  const int threads = argc > 2 ? std::max(1, std::atoi(argv[2])) : 1;
  ggml_type type = GGML_TYPE_COUNT;
  for (int i = 0; i < GGML_TYPE_COUNT; ++i) {
    const ggml_type_traits* t = ggml_get_type_traits(static_cast<ggml_type>(i));
    if (t && t->type_name && std::strcmp(t->type_name, argv[1]) == 0 && t->blck_size > 0)
      type = static_cast<ggml_type>(i);
  }
  if (type == GGML_TYPE_COUNT) {
    std::fprintf(stderr, "ggml_decode_product: no type %s\n", argv[1]);
    return 2;
  }
  const size_t row = ggml_row_size(type, kCols);
  const int64_t l2_rows = std::max<int64_t>(8, static_cast<int64_t>(512 * 1024 * threads / row) / 8 * 8);
  const int64_t memory_rows = static_cast<int64_t>(((size_t{256} << 20) / row + 63) / 64 * 64);
  bool repacked_l2 = false, repacked_memory = false;
  const double l2 = time_products(type, l2_rows, 16, threads, &repacked_l2);
  const double memory = time_products(type, memory_rows, 1, threads, &repacked_memory);
  std::printf("ggml %s, %d thread(s)%s: in L2 [%lld,%lld] %.2f GB/s, from memory [%lld,%lld] %.2f GB/s\n", argv[1],
              threads, repacked_l2 ? ", repacked" : "", static_cast<long long>(kCols), static_cast<long long>(l2_rows),
              l2, static_cast<long long>(kCols), static_cast<long long>(memory_rows), memory);
  return 0;
}
