// `weft gguf info FILE`: prints a GGUF file's metadata and tensor table,
// then how weft will run it (the family and the hyper-parameters it uses).
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "weft/core/error.h"
#include "weft/gguf/gguf.h"
#include "weft/model/model.h"

namespace weft::tools {


namespace {

constexpr size_t kShownElements = 5;  // array elements printed before "..."
constexpr size_t kShownChars = 60;    // string characters printed before "..."

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < kShownChars; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') out += '\\';
    if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + (s.size() > kShownChars ? "\"..." : "\"");
}

std::string scalar_text(const GgufValue& v) {
  switch (v.type) {
    case GgufType::u8: case GgufType::u16: case GgufType::u32: case GgufType::u64: return std::to_string(v.u);
    case GgufType::i8: case GgufType::i16: case GgufType::i32: case GgufType::i64: return std::to_string(v.i);
    case GgufType::f32: case GgufType::f64: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.9g", v.f);
      return buf;
    }
    case GgufType::boolean: return v.u ? "true" : "false";
    case GgufType::string: return quoted(v.s);
    case GgufType::array: break;
  }
  const GgufArray& a = v.arr;
  std::string out = std::string("array<") + gguf_type_name(a.elem_type()) + ">[" + std::to_string(a.size()) + "] [";
  for (size_t i = 0; i < a.size() && i < kShownElements; ++i) out += (i ? ", " : "") + scalar_text(a.element(i));
  return out + (a.size() > kShownElements ? ", ...]" : "]");
}

}  // namespace

int cmd_gguf_info(const std::string& path) {
  std::unique_ptr<GgufFile> f = GgufFile::open(path);
  std::vector<std::string> keys = f->keys();
  std::printf("%s: GGUF v%u, %zu metadata keys, %zu tensors, alignment %u, data at byte %" PRIu64 "\n",
              path.c_str(), f->version(), keys.size(), f->tensors().size(), f->alignment(), f->data_offset());
  if (f->parts().size() > 1) {
    std::printf("\nparts (a split model; metadata from part 1):\n");
    for (size_t i = 0; i < f->parts().size(); ++i) {
      const GgufPart& p = f->parts()[i];
      std::printf("  %zu  %s: %" PRIu64 " bytes, %zu tensors, alignment %u, data at byte %" PRIu64 "\n", i + 1,
                  p.path.c_str(), p.size, p.n_tensors, p.alignment, p.data_offset);
    }
  }
  std::printf("\nmetadata:\n");
  for (const std::string& k : keys) {
    const GgufValue* v = f->find(k);
    std::printf("  %-40s %-6s %s\n", k.c_str(), gguf_type_name(v->type), scalar_text(*v).c_str());
  }
  const bool split = f->parts().size() > 1;
  std::printf("\ntensors:\n  %-40s %-8s %-28s %14s %14s%s\n", "name", "dtype", "shape", "offset", "bytes",
              split ? "  part" : "");
  uint64_t total = 0;
  for (const GgufTensorInfo& t : f->tensors()) {
    std::string dtype = t.supported ? std::string(dtype_name(t.type)) : "id " + std::to_string(t.ggml_type) + "?";
    std::string shape = "[";
    for (int d = 0; d < t.n_dims; ++d) shape += (d ? ", " : "") + std::to_string(t.ne[d]);
    shape += "]";
    std::printf("  %-40s %-8s %-28s %14" PRIu64 " %14zu", t.name.c_str(), dtype.c_str(), shape.c_str(), t.offset,
                t.nbytes);
    if (split) std::printf("  %5u", t.part + 1);
    std::printf("\n");
    total += t.nbytes;
  }
  std::printf("\n%zu tensors, %" PRIu64 " bytes of data\n", f->tensors().size(), total);
  // How weft will run it (or why it will not).
  try {
    std::printf("\n%s", model::describe(model::LlamaParams::from_gguf(*f)).c_str());
  } catch (const Error& e) {
    std::printf("\nmodel: weft does not run this file: %s\n", e.what());
  }
  return 0;
}

void add_gguf_commands(CLI::App& app, Commands& out) {
  CLI::App* gguf = app.add_subcommand("gguf", "inspect GGUF model files");
  gguf->require_subcommand(1);
  auto path = std::make_shared<std::string>();
  CLI::App* info = gguf->add_subcommand("info", "print a GGUF file's metadata and tensor table");
  info->add_option("file", *path, "GGUF file")->required();
  out.push_back({info, [path] { return cmd_gguf_info(*path); }});
}

}  // namespace weft::tools
