/* The standard quantizer's work on a GGUF file, timed: what llama-quantize
 * (llama.cpp's src/llama-quant.cpp) does per tensor, driven by ggml's own
 * quantizers, for comparing `weft quantize` with it on one machine
 * (docs/quantization.md, "Speed"). Per tensor, as that tool does: an input
 * of another type is decoded to f32 by nthread threads over equal runs of
 * blocks; rows are quantized by ggml_quantize_chunk in chunks of at least
 * 16,384 values, nthread threads taking chunks from a counter under a
 * mutex; each chunk is checked by ggml_validate_row_data; the tensor is
 * then written with its padding to 32 bytes, and the metadata last. The
 * target types are read from REF (a file `weft quantize` wrote from IN, so
 * both do the same conversions); with a fifth argument each tensor is also
 * compared with REF's bytes and the count printed.
 *
 * Not part of weft's build: it is compiled against a ggml checkout, once:
 *
 *   cmake -S ggml -B /tmp/g -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
 *       -DBUILD_SHARED_LIBS=OFF -DGGML_OPENMP=OFF -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF
 *   ninja -C /tmp/g
 *   g++ -O2 -std=c++17 -Iggml/include bench/reference/ggml_quantize_flow.cpp \
 *       /tmp/g/src/libggml.a /tmp/g/src/libggml-cpu.a /tmp/g/src/libggml-base.a -lpthread -o ggml_quantize_flow
 *   ./ggml_quantize_flow IN.gguf REF.gguf OUT.gguf NTHREAD [check] */
#include <fcntl.h>
#include <ggml-cpu.h>
#include <ggml.h>
#include <gguf.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

static void dequant(ggml_type t, const void* src, float* dst, size_t n, int nthread) {
  auto tf = ggml_get_type_traits(t)->to_float;
  if (nthread < 2) {
    tf(src, dst, n);
    return;
  }
  size_t bs = ggml_blck_size(t), bb = ggml_type_size(t);
  size_t nblocks = n / bs, per = nblocks / nthread, spare = nblocks - per * nthread, in = 0, out = 0;
  std::vector<std::thread> w;
  for (int k = 0; k < nthread; ++k) {
    size_t tb = per + (k == nthread - 1 ? spare : 0);
    w.emplace_back([=] { tf((const char*)src + in, dst + out, tb * bs); });
    in += tb * bb;
    out += tb * bs;
  }
  for (auto& x : w) x.join();
}

static size_t quant(ggml_type t, const float* f, void* dst, int64_t chunk, int64_t nrows, int64_t npr, int nthread) {
  if (nthread < 2) {
    size_t s = ggml_quantize_chunk(t, f, dst, 0, nrows, npr, nullptr);
    if (!ggml_validate_row_data(t, dst, s)) throw std::runtime_error("quantized data validation failed");
    return s;
  }
  std::mutex m;
  int64_t counter = 0;
  size_t total = 0;
  auto compute = [&] {
    const int64_t per = chunk / npr;
    size_t local = 0;
    while (true) {
      std::unique_lock<std::mutex> l(m);
      int64_t first = counter;
      counter += per;
      if (first >= nrows) {
        total += local;
        break;
      }
      l.unlock();
      int64_t n = std::min(nrows - first, per);
      size_t s = ggml_quantize_chunk(t, f, dst, first * npr, n, npr, nullptr);
      local += s;
      if (!ggml_validate_row_data(t, (char*)dst + first * ggml_row_size(t, npr), s))
        throw std::runtime_error("quantized data validation failed");
    }
  };
  std::vector<std::thread> w;
  for (int k = 0; k < nthread - 1; ++k) w.emplace_back(compute);
  compute();
  for (auto& x : w) x.join();
  return total;
}

// One tensor of another type into work: decoded to f32 unless it is f32,
// then quantized in llama-quantize's chunks; returns the bytes written.
static size_t convert(const ggml_tensor* t, ggml_type to, const char* data, int nthread, std::vector<float>& f32,
                      std::vector<uint8_t>& work) {
  const int64_t ne = ggml_nelements(t);
  const float* values = reinterpret_cast<const float*>(data);
  if (t->type != GGML_TYPE_F32) {
    if (f32.size() < static_cast<size_t>(ne)) f32.resize(ne);
    dequant(t->type, data, f32.data(), ne, nthread);
    values = f32.data();
  }
  if (work.size() < static_cast<size_t>(ne) * 4) work.resize(ne * 4);
  const int64_t per_row = t->ne[0], nrows = t->ne[1], min_chunk = 32 * 512;
  const int64_t chunk = per_row >= min_chunk ? per_row : per_row * ((min_chunk + per_row - 1) / per_row);
  const int64_t nchunk = (per_row * nrows + chunk - 1) / chunk;
  const int use = nthread > 1 ? static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(nthread, nchunk))) : 1;
  return quant(to, values, work.data(), chunk, nrows, per_row, use);
}

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: ggml_quantize_flow IN.gguf REF.gguf OUT.gguf NTHREAD [check]\n");
    return 2;
  }
  auto t0 = std::chrono::steady_clock::now();
  ggml_cpu_init();
  ggml_context* meta_in = nullptr;
  ggml_context* meta_ref = nullptr;
  gguf_context* in = gguf_init_from_file(argv[1], {true, &meta_in});
  gguf_context* ref = gguf_init_from_file(argv[2], {true, &meta_ref});
  if (!in || !ref) {
    fprintf(stderr, "cannot read %s\n", in ? argv[2] : argv[1]);
    return 1;
  }
  int nthread = atoi(argv[4]);
  const bool check = argc > 5;
  int fd = open(argv[1], O_RDONLY);
  struct stat st;
  fstat(fd, &st);
  const char* map = (const char*)mmap(nullptr, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  int rfd = open(argv[2], O_RDONLY);
  struct stat rst;
  fstat(rfd, &rst);
  const char* rmap = (const char*)mmap(nullptr, rst.st_size, PROT_READ, MAP_SHARED, rfd, 0);
  gguf_context* out = gguf_init_empty();
  gguf_set_kv(out, in);
  gguf_set_val_u32(out, "general.quantization_version", 2);
  gguf_set_val_u32(out, "general.file_type", 15);
  int n = gguf_get_n_tensors(in);
  for (int i = 0; i < n; ++i) gguf_add_tensor(out, ggml_get_tensor(meta_in, gguf_get_tensor_name(in, i)));
  std::ofstream fo(argv[3], std::ios::binary);
  std::vector<char> zeros(gguf_get_meta_size(out), 0);
  fo.write(zeros.data(), zeros.size());
  std::vector<float> f32;
  std::vector<uint8_t> work;
  int same = 0, converted = 0;
  for (int i = 0; i < n; ++i) {
    const char* name = gguf_get_tensor_name(in, i);
    ggml_tensor* t = ggml_get_tensor(meta_in, name);
    const char* data = map + gguf_get_data_offset(in) + gguf_get_tensor_offset(in, i);
    int64_t ri = gguf_find_tensor(ref, name);
    if (ri < 0) {
      fprintf(stderr, "%s is not in %s\n", name, argv[2]);
      return 1;
    }
    ggml_type nt = gguf_get_tensor_type(ref, ri);
    const void* nd = data;
    size_t ns = ggml_nbytes(t);
    if (nt != t->type) {
      ns = convert(t, nt, data, nthread, f32, work);
      nd = work.data();
      ++converted;
    }
    gguf_set_tensor_type(out, name, nt);
    gguf_set_tensor_data(out, name, nd);
    fo.write((const char*)nd, ns);
    size_t pad = GGML_PAD(ns, 32) - ns;
    std::vector<char> z(pad, 0);
    fo.write(z.data(), pad);
    const char* rd = rmap + gguf_get_data_offset(ref) + gguf_get_tensor_offset(ref, ri);
    if (check) same += memcmp(rd, nd, ns) == 0;
  }
  fo.seekp(0);
  std::vector<uint8_t> md(gguf_get_meta_size(out));
  gguf_get_meta_data(out, md.data());
  fo.write((const char*)md.data(), md.size());
  fo.close();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("%d tensors, %d converted, %d byte-identical to REF; %.1f s\n", n, converted, same, s);
}
