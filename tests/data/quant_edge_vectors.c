/* Writes tests/data/quant-edge-vectors.json: the hard cases of a scale
 * search (all-zero, constant, outlier, tiny and subnormal, near the f16
 * limits, alternating signs, rounding midpoints) for every block type weft
 * quantizes, with the bytes ggml's own quantizer makes of them and the
 * floats ggml's dequantizer returns for those bytes. The quantizer entry
 * points are the ones ggml_quantize_chunk calls for llama-quantize without
 * an importance matrix (quantize_TYPE(src, dst, nrows, n_per_row, NULL)),
 * the same that wrote quant-vectors.json.
 *
 * Not part of weft's build: it is compiled against ggml's sources, outside
 * the repository, once (see "source" in the output for the exact commit):
 *
 *   git -C ggml archive HEAD src include | tar -x -C /tmp/g
 *   gcc -O2 -DNDEBUG -std=c11 -c /tmp/g/src/ggml-quants.c -I/tmp/g/include -I/tmp/g/src
 *   gcc -O2 -DNDEBUG -std=c11 quant_edge_vectors.c ggml-quants.o -I/tmp/g/include -I/tmp/g/src -lm \
 *       -o quant_edge_vectors
 *   ./quant_edge_vectors GGML_COMMIT > tests/data/quant-edge-vectors.json
 *
 * -DNDEBUG as in a release build of llama-quantize: ggml's nearest_int()
 * asserts |x| <= 4194303, which the f32-subnormal block fails in q2_K's
 * min search (its inverse scale is infinite); a release build goes on, and
 * its bytes are what the standard tool writes.
 *
 * Every row is one 256-value super-block (8 blocks of 32), the same inputs
 * for every type; magnitudes stay within the f16 range, so every scale and
 * minimum the types store is finite. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-common.h"
#include "ggml-quants.h"

/* The rest of ggml that ggml-quants.o links to: the quantize_TYPE entry
 * points ask ggml_row_size for their return value; nothing else is called. */
static size_t row_size_of(enum ggml_type type, int64_t ne);
void ggml_abort(const char* file, int line, const char* fmt, ...) { abort(); }
size_t ggml_row_size(enum ggml_type type, int64_t ne) { return row_size_of(type, ne); }
const char* ggml_type_name(enum ggml_type type) { abort(); }
size_t ggml_type_size(enum ggml_type type) { abort(); }

enum { kRow = 256, kRows = 8 };

static const char* const kRowNames[kRows] = {
    "zeros and signed zeros",
    "constant positive",
    "constant negative",
    "constant blocks of different values, flat blocks with one outlier",
    "tiny values: f16-subnormal scales, scales that round to zero, f32 subnormals",
    "near the f16 maximum",
    "alternating signs",
    "rounding midpoints, and super-blocks with zero sub-blocks"};

static void fill(float* b, int n, float v) {
  for (int j = 0; j < n; ++j) b[j] = v;
}

static void make_row(int r, float* x) {
  switch (r) {
    case 0:
      fill(x, kRow, 0.0f);
      for (int j = 128; j < kRow; ++j) x[j] = j % 2 ? -0.0f : 0.0f;
      break;
    case 1:
      fill(x, kRow, 0.3125f);
      break;
    case 2:
      fill(x, kRow, -2.5f);
      break;
    case 3:
      for (int k = 0; k < 4; ++k) fill(x + 32 * k, 32, (k % 2 ? -1.0f : 1.0f) * 0.37f * (float)(k + 1));
      fill(x + 128, 32, 0.02f);
      x[128 + 5] = 5.0f; /* positive outlier */
      fill(x + 160, 32, -0.02f);
      x[160 + 30] = -7.0f; /* negative outlier */
      fill(x + 192, 32, 0.5f);
      x[192 + 16] = -0.5f; /* one sign flip: max and min equal in magnitude */
      fill(x + 224, 32, 1.0f);
      x[224] = 1000.0f; /* an outlier that dwarfs the sub-block scales */
      break;
    case 4:
      for (int j = 0; j < 32; ++j) x[j] = (j % 3 ? 1.0f : -1.0f) * 1e-3f * (1.0f + j / 32.0f); /* d f16-subnormal */
      for (int j = 0; j < 32; ++j) x[32 + j] = (j % 2 ? -1.0f : 1.0f) * 2e-6f * (1.0f + j / 16.0f);
      for (int j = 0; j < 32; ++j) x[64 + j] = (j % 5 ? 1.0f : -1.0f) * 1e-8f * (float)(j + 1); /* d rounds to 0 */
      for (int j = 0; j < 32; ++j) x[96 + j] = ldexpf((float)(j % 7) - 3.0f, -146 + j % 4); /* f32 subnormals */
      for (int j = 0; j < 32; ++j) x[128 + j] = (j % 2 ? -1.0f : 1.0f) * 1e-30f * (float)(j + 1);
      for (int j = 0; j < 32; ++j) x[160 + j] = 6.1e-5f * (float)(j % 9) / 8.0f; /* around the f16 normal limit */
      for (int j = 0; j < 32; ++j) x[192 + j] = j == 7 ? 1e-4f : 1e-12f * (float)(j - 16);
      for (int j = 0; j < 32; ++j) x[224 + j] = j % 4 ? 0.0f : -3e-7f;
      break;
    case 5:
      fill(x, 32, 65504.0f);
      for (int j = 0; j < 32; ++j) x[32 + j] = j % 2 ? -65504.0f : 65504.0f;
      for (int j = 0; j < 32; ++j) x[64 + j] = 65000.0f * (float)(j - 15) / 16.0f;
      fill(x + 96, 32, -65519.0f); /* rounds to -65504 as an f16 */
      for (int j = 0; j < 32; ++j) x[128 + j] = 60000.0f - 1000.0f * (float)j;
      for (int j = 0; j < 32; ++j) x[160 + j] = j == 3 ? 65504.0f : 1.0f;
      for (int j = 0; j < 32; ++j) x[192 + j] = j == 9 ? -65504.0f : -0.001f * (float)j;
      for (int j = 0; j < 32; ++j) x[224 + j] = 32768.0f + (float)j;
      break;
    case 6:
      for (int j = 0; j < 32; ++j) x[j] = j % 2 ? -1.0f : 1.0f;
      for (int j = 0; j < 32; ++j) x[32 + j] = j % 2 ? 1.0f : -1.0f;
      for (int j = 0; j < 32; ++j) x[64 + j] = (j % 2 ? -1.0f : 1.0f) * 0.1f * (float)(j + 1);
      for (int j = 0; j < 32; ++j) x[96 + j] = (j % 2 ? 1.0f : -1.0f) * 0.1f * (float)(32 - j);
      for (int j = 0; j < 32; ++j) x[128 + j] = (j % 2 ? -3.0f : 2.0f);
      for (int j = 0; j < 32; ++j) x[160 + j] = (j % 2 ? -2.0f : 3.0f);
      for (int j = 0; j < 32; ++j) x[192 + j] = ((j / 2) % 2 ? -1.0f : 1.0f) * (j % 2 ? 0.25f : 4.0f);
      for (int j = 0; j < 32; ++j) x[224 + j] = (j % 2 ? -1.0f : 1.0f) * (j < 16 ? 0.01f : 100.0f);
      break;
    case 7:
      /* q8_0: amax 127 gives d = 1, so these sit on the midpoints of q. */
      for (int j = 0; j < 32; ++j) x[j] = j == 0 ? 127.0f : ((j % 2 ? -1.0f : 1.0f) * ((float)(j * 3 % 100) + 0.5f));
      /* q4_0: the largest magnitude -8 gives d = 1: x / d + 8.5 lands on integers. */
      for (int j = 0; j < 32; ++j) x[32 + j] = j == 0 ? -8.0f : (float)(j % 15) - 7.5f;
      /* q4_1: min 0, max 15 gives d = 1 and the values sit on midpoints. */
      for (int j = 0; j < 32; ++j) x[64 + j] = j == 0 ? 0.0f : j == 1 ? 15.0f : (float)(j % 15) + 0.5f;
      /* A zero sub-block of 16 beside a non-zero one, twice. */
      fill(x + 96, 16, 0.0f);
      for (int j = 16; j < 32; ++j) x[96 + j] = 0.25f * (float)(j - 20);
      for (int j = 0; j < 16; ++j) x[128 + j] = -0.125f * (float)(j + 1);
      fill(x + 144, 16, 0.0f);
      fill(x + 160, 32, 0.0f);
      /* q5_0: the largest magnitude -16 gives d = 1. */
      for (int j = 0; j < 32; ++j) x[192 + j] = j == 0 ? -16.0f : (float)(j % 31) - 15.5f;
      for (int j = 0; j < 32; ++j) x[224 + j] = (float)(j % 8) * 0.5f + 0.25f;
      break;
  }
}

struct Type {
  const char* name;
  int gguf_id;
  int block_values;
  int block_bytes;
  size_t (*quantize)(const float*, void*, int64_t, int64_t, const float*);
  void (*dequantize)(const void*, float*, int64_t);
};

#define DEQ(T) ((void (*)(const void*, float*, int64_t))dequantize_row_##T)
static const struct Type kTypes[] = {
    {"q4_0", 2, 32, sizeof(block_q4_0), quantize_q4_0, DEQ(q4_0)},
    {"q4_1", 3, 32, sizeof(block_q4_1), quantize_q4_1, DEQ(q4_1)},
    {"q5_0", 6, 32, sizeof(block_q5_0), quantize_q5_0, DEQ(q5_0)},
    {"q5_1", 7, 32, sizeof(block_q5_1), quantize_q5_1, DEQ(q5_1)},
    {"q8_0", 8, 32, sizeof(block_q8_0), quantize_q8_0, DEQ(q8_0)},
    {"q2_K", 10, 256, sizeof(block_q2_K), quantize_q2_K, DEQ(q2_K)},
    {"q3_K", 11, 256, sizeof(block_q3_K), quantize_q3_K, DEQ(q3_K)},
    {"q4_K", 12, 256, sizeof(block_q4_K), quantize_q4_K, DEQ(q4_K)},
    {"q5_K", 13, 256, sizeof(block_q5_K), quantize_q5_K, DEQ(q5_K)},
    {"q6_K", 14, 256, sizeof(block_q6_K), quantize_q6_K, DEQ(q6_K)},
    {"iq4_nl", 20, 32, sizeof(block_iq4_nl), quantize_iq4_nl, DEQ(iq4_nl)},
    {"iq4_xs", 23, 256, sizeof(block_iq4_xs), quantize_iq4_xs, DEQ(iq4_xs)},
    {"mxfp4", 39, 32, sizeof(block_mxfp4), quantize_mxfp4, DEQ(mxfp4)},
};
enum { kTypeCount = sizeof kTypes / sizeof kTypes[0] };

static size_t row_size_of(enum ggml_type type, int64_t ne) {
  for (int t = 0; t < kTypeCount; ++t)
    if (kTypes[t].gguf_id == (int)type) return (size_t)(ne / kTypes[t].block_values * kTypes[t].block_bytes);
  abort();
}

/* %.9g: nine significant digits bring every float back exactly. */
static void print_floats(const float* v, int n) {
  printf("[");
  for (int i = 0; i < n; ++i) printf("%s%.9g", i ? "," : "", (double)v[i]);
  printf("]");
}

int main(int argc, char** argv) {
  static float x[kRows][kRow];
  for (int r = 0; r < kRows; ++r) make_row(r, x[r]);
  printf("{\"source\":\"ggml %s: quantize_TYPE(..., imatrix = NULL) as ggml_quantize_chunk calls it, and "
         "dequantize_row_TYPE (src/ggml-quants.c) compiled with gcc -O2 -DNDEBUG on x86-64 glibc, driven by "
         "tests/data/quant_edge_vectors.c\",\n",
         argc > 1 ? argv[1] : "(unknown commit)");
  printf("\"tensor_row_values\":%d,\"row_names\":[", kRow);
  for (int r = 0; r < kRows; ++r) printf("%s\"%s\"", r ? "," : "", kRowNames[r]);
  printf("],\"types\":[\n");
  for (int t = 0; t < kTypeCount; ++t) {
    const struct Type* ty = &kTypes[t];
    printf("{\"type\":\"%s\",\"gguf_dtype_id\":%d,\"block_values\":%d,\"block_bytes\":%d,\"rows\":[\n", ty->name,
           ty->gguf_id, ty->block_values, ty->block_bytes);
    for (int r = 0; r < kRows; ++r) {
      static uint8_t q[kRow * 4];
      float y[kRow];
      const size_t n = ty->quantize(x[r], q, 1, kRow, NULL);
      if (n != (size_t)(kRow / ty->block_values * ty->block_bytes)) {
        fprintf(stderr, "%s: %zu bytes\n", ty->name, n);
        return 1;
      }
      ty->dequantize(q, y, kRow);
      for (int i = 0; i < kRow; ++i) {
        if (!isfinite(y[i])) {
          fprintf(stderr, "%s row %d: value %d dequantizes to %g\n", ty->name, r, i, (double)y[i]);
          return 1;
        }
      }
      printf("{\"input_f32\":");
      print_floats(x[r], kRow);
      printf(",\n\"quantized_hex\":\"");
      for (size_t i = 0; i < n; ++i) printf("%02x", q[i]);
      printf("\",\n\"dequantized_f32\":");
      print_floats(y, kRow);
      printf("}%s\n", r + 1 < kRows ? "," : "");
    }
    printf("]}%s\n", t + 1 < kTypeCount ? "," : "");
  }
  printf("]}\n");
  return 0;
}
