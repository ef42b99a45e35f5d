// Ollama's routes (docs/serve.md): /api/chat and /api/generate streamed as
// NDJSON or answered whole, /api/tags, /api/show and /api/version
// (/api/embed: routes_embeddings.cpp).
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>
#include <mutex>

#include "serve/ollama_api.h"
#include "serve/route_helpers.h"
#include "weft/core/dtype.h"
#include "weft/gguf/gguf.h"
#include "weft/version.h"

namespace weft::serve {

namespace {

constexpr const char* kNdjson = "application/x-ndjson";

// What /api/tags and /api/show say of the model file, read once from its
// metadata (the first part of a split file).
struct ModelFacts {
  int64_t size = 0;             // bytes of the first part
  std::string modified_at;      // its mtime, RFC 3339
  std::string digest;           // an identity of path, size and mtime (not a hash of the content)
  std::string family;           // general.architecture
  std::string parameter_size;   // "494.0M", "8.0B": elements over every tensor
  std::string quantization;     // the dtype most of the weights' bytes have, upper-case ("Q4_0")
  std::string template_source;  // --chat-template, else tokenizer.chat_template, else ""
  Json model_info = Json::object();
};

std::string human_count(double n) {
  char buf[32];
  if (n >= 1e9)
    std::snprintf(buf, sizeof buf, "%.1fB", n / 1e9);
  else if (n >= 1e6)
    std::snprintf(buf, sizeof buf, "%.1fM", n / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.1fK", n / 1e3);
  return buf;
}

ModelFacts read_facts(const std::string& path, const std::string& template_override) {
  ModelFacts f;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    f.size = st.st_size;
    std::tm utc{};
    gmtime_r(&st.st_mtime, &utc);
    char buf[40];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
    f.modified_at = buf;
    char id[64];
    std::snprintf(id, sizeof id, "%016zx%016llx%016llx", std::hash<std::string>{}(path),
                  static_cast<unsigned long long>(st.st_size), static_cast<unsigned long long>(st.st_mtime));
    f.digest = id;
  }
  const auto file = GgufFile::open(path);
  f.family = file->get_string("general.architecture").value_or("");
  double elements = 0;
  std::map<std::string, size_t> bytes_by_type;
  for (const GgufTensorInfo& t : file->tensors()) {
    elements += static_cast<double>(t.ne[0]) * t.ne[1] * t.ne[2] * t.ne[3];
    if (t.supported && t.n_dims >= 2) bytes_by_type[std::string(dtype_name(t.type))] += t.nbytes;
  }
  f.parameter_size = human_count(elements);
  auto most = std::max_element(bytes_by_type.begin(), bytes_by_type.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  if (most != bytes_by_type.end()) {
    f.quantization = most->first;
    std::transform(f.quantization.begin(), f.quantization.end(), f.quantization.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  }
  f.template_source =
      !template_override.empty() ? template_override : file->get_string("tokenizer.chat_template").value_or("");
  f.model_info["general.architecture"] = f.family;
  f.model_info["general.parameter_count"] = static_cast<int64_t>(elements);
  for (const char* key :
       {"context_length", "embedding_length", "block_count", "attention.head_count", "attention.head_count_kv"})
    if (auto v = file->get_i64(f.family + "." + key)) f.model_info[f.family + "." + key] = *v;
  return f;
}

// Read on first use and kept: the file does not change while it is served.
const ModelFacts& model_facts(const Server::Impl& s) {
  static std::mutex mu;
  static std::map<std::string, ModelFacts> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(s.options.session.model);
  if (it == cache.end())
    it = cache.emplace(s.options.session.model, read_facts(s.options.session.model, s.options.chat_template)).first;
  return it->second;
}

Json details(const ModelFacts& f) {
  return Json{{"parent_model", ""},
              {"format", "gguf"},
              {"family", f.family},
              {"families", Json::array({f.family})},
              {"parameter_size", f.parameter_size},
              {"quantization_level", f.quantization}};
}

// Ollama's names carry a tag; the server's model is NAME:latest unless its
// alias has one.
std::string tagged(const std::string& name) {
  return name.find(':') == std::string::npos ? name + ":latest" : name;
}

void post_generate(Server::Impl& s, const httplib::Request& req, httplib::Response& res, bool chat) {
  guarded(
      res,
      [&] {
        Engine& engine = loaded_engine(s);
        const auto arrival = std::chrono::steady_clock::now();
        const auto deadline =
            arrival + std::chrono::milliseconds(static_cast<int64_t>(s.options.request_timeout_seconds * 1e3));
        const PeerAddress peer{req.remote_addr, req.remote_port, s.port};
        const OllamaRequest r = parse_ollama(parse_body(req), chat, s.api, RenderControl{deadline, client_gone(peer)});
        OllamaMeta meta{r.model.empty() ? tagged(s.model_name) : r.model, ollama_time()};
        if (r.load_only) {
          send_json(res, 200, ollama_loaded(r, meta));
          return;
        }
        std::shared_ptr<Request> request = submit_or_busy(engine, r.job, deadline, res);
        auto seconds = [arrival] {
          return std::chrono::duration<double>(std::chrono::steady_clock::now() - arrival).count();
        };
        if (!r.stream) {
          const Collected c = collect_reply(*request, peer);
          send_json(res, 200, ollama_done(r, meta, c.text, c.finish, seconds()));
          return;
        }
        relay_stream(res, request, peer, kNdjson, [r, meta, seconds](const Event& e) {
          Json line;
          if (e.finished && e.finish_reason == "error")
            line = {{"error", "generation failed: " + e.error}};
          else if (e.finished && e.finish_reason == "cancelled")
            line = {{"error", "the request was cancelled: the server is stopping"}};
          else if (e.finished)
            line = ollama_done(r, meta, e.text, e, seconds());
          else
            line = ollama_piece(r, meta, e.text);
          return dump_json(line) + "\n";
        });
      },
      ollama_error);
}

}  // namespace

void add_ollama_routes(Server::Impl& s) {
  auto route = [&s](auto handler) {
    return [&s, handler](const httplib::Request& req, httplib::Response& res) {
      s.begin(req);
      handler(req, res);
    };
  };
  s.http.Post("/api/chat", route([&s](const auto& req, auto& res) { post_generate(s, req, res, true); }));
  s.http.Post("/api/generate", route([&s](const auto& req, auto& res) { post_generate(s, req, res, false); }));
  s.http.Get("/api/version", route([](const auto&, auto& res) {
               send_json(res, 200, {{"version", std::string(weft::version())}});
             }));
  s.http.Get("/api/tags", route([&s](const auto&, auto& res) {
               guarded(
                   res,
                   [&] {
                     loaded_engine(s);
                     const ModelFacts& f = model_facts(s);
                     const std::string name = tagged(s.model_name);
                     Json model = {{"name", name},   {"model", name},      {"modified_at", f.modified_at},
                                   {"size", f.size}, {"digest", f.digest}, {"details", details(f)}};
                     send_json(res, 200, {{"models", Json::array({model})}});
                   },
                   ollama_error);
             }));
  s.http.Post("/api/show", route([&s](const auto& req, auto& res) {
                guarded(
                    res,
                    [&] {
                      loaded_engine(s);
                      const Json body = parse_body(req);
                      const Json* name = body.is_object() ? (body.contains("model")  ? &body["model"]
                                                             : body.contains("name") ? &body["name"]
                                                                                     : nullptr)
                                                          : nullptr;
                      if (!name || !name->is_string()) bad_request("model", "'model' must be a string");
                      const std::string asked = name->get<std::string>();
                      if (asked != s.model_name && asked != tagged(s.model_name))
                        throw ApiError(
                            404, "not_found_error",
                            "model '" + asked + "' not found (this server has '" + tagged(s.model_name) + "')");
                      const ModelFacts& f = model_facts(s);
                      send_json(res, 200,
                                {{"modelfile", ""},
                                 {"parameters", ""},
                                 {"template", f.template_source},
                                 {"details", details(f)},
                                 {"model_info", f.model_info},
                                 {"capabilities", Json::array({"completion"})},
                                 {"modified_at", f.modified_at}});
                    },
                    ollama_error);
              }));
}

}  // namespace weft::serve
