// Pooling and normalisation of hidden states into embeddings (embedding.h).
#include "serve/embedding.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "weft/core/error.h"

namespace weft::serve {

namespace {
constexpr const char* kEmbeddingWhere = "embeddings";
}  // namespace

std::optional<Pooling> pooling_of_file(int64_t pooling_type) {
  switch (pooling_type) {
    case 1: return Pooling::mean;
    case 2: return Pooling::cls;
    case 4: return std::nullopt;  // rank
    default: return Pooling::last;  // 3, or none given (-1, 0): a decoder model's last row
  }
}

std::optional<Pooling> pooling_named(const std::string& name) {
  if (name == "mean") return Pooling::mean;
  if (name == "cls") return Pooling::cls;
  if (name == "last") return Pooling::last;
  return std::nullopt;
}

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::mean: return "mean";
    case Pooling::cls: return "cls";
    case Pooling::last: return "last";
  }
  return "last";
}

std::vector<float> pool_normalized(std::span<const float> rows, size_t n_embd, Pooling pooling) {
  if (n_embd == 0 || rows.empty() || rows.size() % n_embd != 0)
    fail(ErrorKind::invalid_input, kEmbeddingWhere,
         std::to_string(rows.size()) + " hidden values are not whole rows of " + std::to_string(n_embd));
  const size_t n = rows.size() / n_embd;
  std::vector<double> sum(n_embd, 0.0);
  const size_t first = pooling == Pooling::last ? n - 1 : 0;
  const size_t end = pooling == Pooling::mean ? n : first + 1;
  for (size_t t = first; t < end; ++t)
    for (size_t c = 0; c < n_embd; ++c) sum[c] += rows[t * n_embd + c];
  double norm = 0;
  for (double v : sum) norm += v * v;  // the mean's 1/n cancels in the normalisation
  norm = std::sqrt(norm);
  std::vector<float> out(n_embd, 0.0f);
  if (norm > 0)
    for (size_t c = 0; c < n_embd; ++c) out[c] = static_cast<float>(sum[c] / norm);
  return out;
}

std::string base64_floats(std::span<const float> v) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<unsigned char> bytes(v.size() * 4);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint32_t u = std::bit_cast<uint32_t>(v[i]);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + static_cast<size_t>(b)] = static_cast<unsigned char>(u >> (8 * b));
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t left = bytes.size() - i;
    const uint32_t chunk = (uint32_t{bytes[i]} << 16) | (left > 1 ? uint32_t{bytes[i + 1]} << 8 : 0) |
                           (left > 2 ? uint32_t{bytes[i + 2]} : 0);
    out += kAlphabet[(chunk >> 18) & 63];
    out += kAlphabet[(chunk >> 12) & 63];
    out += left > 1 ? kAlphabet[(chunk >> 6) & 63] : '=';
    out += left > 2 ? kAlphabet[chunk & 63] : '=';
  }
  return out;
}

}  // namespace weft::serve
