/* Writes tests/data/mxfp4-vectors.json: f32 rows, the bytes ggml's own
 * reference quantizer (quantize_row_mxfp4_ref) makes of them and the floats
 * ggml's dequantizer (dequantize_row_mxfp4) returns for those bytes.
 *
 * Not part of weft's build: it is compiled against ggml's sources, outside
 * the repository, once (see "source" in the output for the exact commit):
 *
 *   git -C ggml archive HEAD src include | tar -x -C /tmp/g
 *   gcc -O2 -std=c11 -c /tmp/g/src/ggml-quants.c -I/tmp/g/include -I/tmp/g/src
 *   gcc -O2 -std=c11 mxfp4_vectors.c ggml-quants.o -I/tmp/g/include -I/tmp/g/src -lm -o mxfp4_vectors
 *   ./mxfp4_vectors GGML_COMMIT > tests/data/mxfp4-vectors.json
 *
 * Rows: 0 edge cases (zeros, signed zeros, equal values, the subnormal
 * scales e = 0 and 1, a block below 2^-125 (whose byte wraps), huge values, powers of two and the floats just
 * below them), 1 values on and beside the rounding midpoints between codes,
 * 2 weight-like values, 3 values over a wide range of magnitudes. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-common.h"
#include "ggml-quants.h"

/* The rest of ggml that ggml-quants.o links to; the two functions used here
 * call none of it. */
void ggml_abort(const char* file, int line, const char* fmt, ...) { abort(); }
size_t ggml_row_size(enum ggml_type type, int64_t ne) { abort(); }
const char* ggml_type_name(enum ggml_type type) { abort(); }
size_t ggml_type_size(enum ggml_type type) { abort(); }

enum { kRow = 256, kRows = 4 };

static uint64_t state = 0x6d786670345f7631ull;
static double uniform(void) { /* splitmix64 */
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

static void block_fill(float* b, float v) {
  for (int j = 0; j < 32; ++j) b[j] = v;
}

static void edge_row(float* x) {
  float* b = x;
  block_fill(b, 0.0f); /* 0: zeros */
  b += 32;
  for (int j = 0; j < 32; ++j) b[j] = j % 2 ? -0.0f : 0.0f; /* 1: signed zeros */
  b += 32;
  for (int j = 0; j < 32; ++j) b[j] = (j % 3 ? 1.0f : -1.0f) * ldexpf(1.0f + j / 64.0f, -124 - j % 4); /* 2: e = 1 */
  b += 32;
  block_fill(b, -1.7f); /* 3: equal negative */
  b += 32;
  for (int j = 0; j < 32; ++j) b[j] = ldexpf((float)(j % 7) - 3.0f, -140 + j % 5); /* 4: subnormal, amax < 2^-125 */
  b += 32;
  for (int j = 0; j < 32; ++j) b[j] = (j % 2 ? -1.0f : 1.0f) * ldexpf(1.0f + j / 32.0f, -125 - j % 3); /* 5: e = 0 */
  b += 32;
  for (int j = 0; j < 32; ++j) b[j] = (j % 3 ? 1.0f : -1.0f) * (j < 4 ? 3.4e38f : 1e30f * (float)(j + 1)); /* 6: huge */
  b += 32;
  /* 7: powers of two, the floats just below them, and largest magnitude negative */
  for (int j = 0; j < 16; ++j) b[j] = ldexpf(1.0f, j - 8);
  for (int j = 16; j < 31; ++j) b[j] = nextafterf(ldexpf(1.0f, j - 24), 0.0f);
  b[31] = -nextafterf(ldexpf(1.0f, 10), 0.0f);
}

/* Block k has amax = 8 (d = 1, levels 0..12): each value sits on a midpoint
 * between two levels, or one float either side of it, times a sign. */
static void midpoint_row(float* x) {
  const float mids[] = {0.5f, 1.5f, 2.5f, 3.5f, 5.0f, 7.0f, 10.0f, 14.0f};
  for (int k = 0; k < 8; ++k) {
    float* b = x + 32 * k;
    const float scale = ldexpf(1.0f, 3 * k - 9); /* the same pattern at other exponents */
    for (int j = 0; j < 32; ++j) {
      float m = mids[j % 8];
      if ((j / 8) % 2 == 1) m = nextafterf(m, k % 2 ? 0.0f : 100.0f);
      if (j / 16 == 1) m = -m;
      b[j] = m * scale;
    }
    b[7] = 8.0f * scale; /* fixes amax at 8 (14 is below 16) */
    b[31] = k % 3 == 0 ? -15.99f * scale : b[31];
  }
}

static void weight_row(float* x) {
  for (int i = 0; i < kRow; ++i) {
    double s = 0;
    for (int k = 0; k < 4; ++k) s += uniform() - 0.5;
    x[i] = (float)(s * 0.05);
    if (uniform() < 0.02) x[i] *= 8.0f;
  }
}

static void wide_row(float* x) {
  for (int i = 0; i < kRow; ++i) {
    const double mag = pow(2.0, -40.0 + 80.0 * uniform());
    x[i] = (float)(uniform() < 0.5 ? -mag : mag);
  }
}

static void print_floats(const float* v, int n) {
  printf("[");
  for (int i = 0; i < n; ++i) printf("%s%.17g", i ? "," : "", (double)v[i]);
  printf("]");
}

int main(int argc, char** argv) {
  static float x[kRows][kRow];
  edge_row(x[0]);
  midpoint_row(x[1]);
  weight_row(x[2]);
  wide_row(x[3]);
  printf("{\"source\":\"ggml %s: quantize_row_mxfp4_ref and dequantize_row_mxfp4 (src/ggml-quants.c) compiled with "
         "gcc -O2 on x86-64 glibc, driven by tests/data/mxfp4_vectors.c\",\n",
         argc > 1 ? argv[1] : "(unknown commit)");
  printf("\"tensor_row_values\":%d,\"types\":[{\"type\":\"mxfp4\",\"gguf_dtype_id\":39,\"block_values\":32,"
         "\"block_bytes\":%d,\"rows\":[\n",
         kRow, (int)sizeof(block_mxfp4));
  for (int r = 0; r < kRows; ++r) {
    block_mxfp4 q[kRow / 32];
    float y[kRow];
    quantize_row_mxfp4_ref(x[r], q, kRow);
    dequantize_row_mxfp4(q, y, kRow);
    printf("{\"input_f32\":");
    print_floats(x[r], kRow);
    printf(",\n\"quantized_hex\":\"");
    const uint8_t* bytes = (const uint8_t*)q;
    for (size_t i = 0; i < sizeof q; ++i) printf("%02x", bytes[i]);
    printf("\",\n\"dequantized_f32\":");
    print_floats(y, kRow);
    printf("}%s\n", r + 1 < kRows ? "," : "");
  }
  printf("]}]}\n");
  return 0;
}
