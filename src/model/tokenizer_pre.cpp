// The pre-tokenizer rules: the hand-written matchers for the three patterns
// most files use, the table from tokenizer.ggml.pre values to rules, and the
// split pipeline.
//
// Each rule's patterns are the model's own (the Split patterns of its
// tokenizer.json, with (?i:...) written out as ASCII case pairs), in the
// order llama.cpp's src/llama-vocab.cpp applies them. Where llama.cpp
// rewrites a pattern for std::regex (\p{Lu} approximated by [^a-z] after a
// letter lookahead, for instance) the original is kept: weft's matcher has
// the exact Unicode categories.
#include "tokenizer_pre.h"

#include <utility>

namespace weft::model::detail {

namespace {

uint32_t lower_ascii(uint32_t c) {
  return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

// 's 't 're 've 'm 'll 'd at i: the match length, or 0.
size_t match_contraction(std::span<const Cp> t, size_t i, bool ignore_case) {
  if (t[i].cp != '\'' || i + 1 >= t.size()) return 0;
  auto at = [&](size_t k) { return k < t.size() ? (ignore_case ? lower_ascii(t[k].cp) : t[k].cp) : 0u; };
  uint32_t a = at(i + 1), b = at(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  return 0;
}

// The whitespace alternatives shared by all three, at a space code point i:
// \s+(?!\S) then \s+ (llama3/qwen2 first try \s*[\r\n]+).
size_t match_space(std::span<const Cp> t, size_t i, bool newline_rule) {
  size_t end = i;
  while (end < t.size() && t[end].cls == CpClass::space) ++end;
  if (newline_rule) {
    size_t last_nl = 0;
    for (size_t k = i; k < end; ++k)
      if (t[k].cp == '\r' || t[k].cp == '\n') last_nl = k + 1;
    if (last_nl) return last_nl - i;
  }
  if (end == t.size() || end - i == 1) return end - i;  // (?!\S) holds at the end; a single space falls to \s+
  return end - 1 - i;                                   // leave the last space for the next word
}

size_t match_gpt2(std::span<const Cp> t, size_t i) {
  if (size_t n = match_contraction(t, i, false)) return n;
  size_t j = i + (t[i].cp == ' ' && i + 1 < t.size() ? 1 : 0);
  const CpClass cls = t[j].cls;
  if (cls != CpClass::space) {
    size_t k = j;
    while (k < t.size() && t[k].cls == cls) ++k;
    return k - i;
  }
  return match_space(t, i, false);
}

// llama3 (digits 3 at a time) and qwen2 (digits 1 at a time).
size_t match_llama3(std::span<const Cp> t, size_t i, size_t max_digits) {
  const size_t n = t.size();
  if (size_t m = match_contraction(t, i, true)) return m;
  const uint32_t c = t[i].cp;
  const CpClass cls = t[i].cls;
  size_t j = i;
  if (cls != CpClass::letter && cls != CpClass::number && c != '\r' && c != '\n' && i + 1 < n &&
      t[i + 1].cls == CpClass::letter)
    j = i + 1;
  if (t[j].cls == CpClass::letter) {
    while (j < n && t[j].cls == CpClass::letter) ++j;
    return j - i;
  }
  if (cls == CpClass::number) {
    size_t k = i;
    while (k < n && k - i < max_digits && t[k].cls == CpClass::number) ++k;
    return k - i;
  }
  j = i + (c == ' ' && i + 1 < n ? 1 : 0);
  if (t[j].cls == CpClass::other) {
    while (j < n && t[j].cls == CpClass::other) ++j;
    while (j < n && (t[j].cp == '\r' || t[j].cp == '\n')) ++j;
    return j - i;
  }
  return match_space(t, i, true);
}

size_t match_builtin(BuiltinSplit b, std::span<const Cp> t, size_t i) {
  switch (b) {
    case BuiltinSplit::gpt2: return match_gpt2(t, i);
    case BuiltinSplit::llama3: return match_llama3(t, i, 3);
    case BuiltinSplit::qwen2: return match_llama3(t, i, 1);
    case BuiltinSplit::none: break;
  }
  return 1;
}

// --- the rules --------------------------------------------------------------

using Step = PreTokenizerRule::Step;
constexpr Step kGpt2{BuiltinSplit::gpt2, {}};
constexpr Step kLlama3{BuiltinSplit::llama3, {}};
constexpr Step kQwen2{BuiltinSplit::qwen2, {}};
constexpr Step re(std::string_view pattern) {
  return {BuiltinSplit::none, pattern};
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d) as the patterns below spell it.
#define WEFT_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
// GPT-4o's and Tekken's letter runs: an optional non-letter, then upper/title
// case letters before lower case ones, or the other way round.
#define WEFT_CASED_WORDS(suffix)                                                           \
  R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)" suffix \
  R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)" suffix

struct RuleSpec {
  std::string_view name;
  std::vector<Step> steps;
  bool ignore_merges = false;
  bool add_bos = false;
};

std::vector<RuleSpec> rule_specs() {
  return {
      {"gpt2", {kGpt2}},
      {"llama3", {kLlama3}, true, true},
      {"llama3-merges", {kLlama3}},  // dbrx, smaug: llama3's split, merging every piece
      {"qwen2", {kQwen2}},
      {"default", {re(R"([\p{P}\$\+<=>\^~\|]+)"), kGpt2, re(R"(\p{N}+)"), re("[0-9][0-9][0-9]")}},
      {"digits-gpt2", {re(R"(\p{N})"), kGpt2}},
      {"falcon", {re(R"([\p{P}\$\+<=>\^~\|`]+)"), kGpt2, re("[0-9][0-9][0-9]")}},
      {"deepseek-llm",
       {re(R"([\r\n])"),
        // Cased letters (\p{LC} of some Unicode version), written as escapes:
        // several are canonical singletons that text tools normalise away.
        re("\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF\u0370-"
           "\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-"
           "\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-"
           "\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-"
           "\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-"
           "\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-"
           "\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-"
           "\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-"
           "\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-"
           "\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-"
           "\U0001E943]+"),
        re(R"(\s?[!-/:-~！-／：-～‘-‟　-。]+)"), re(R"(\s+$)"), re("[一-龥ࠀ-一가-퟿]+"), re(R"(\p{N}+)")}},
      {"deepseek-coder",
       {re(R"([\r\n])"), re(R"(\s?\p{L}+)"), re(R"(\s?\p{P}+)"), re("[一-龥ࠀ-一가-퟿]+"), re(R"(\p{N})")}},
      {"deepseek-v3",
       {re(R"(\p{N}{1,3})"), re("[一-龥぀-ゟ゠-ヿ]+"),
        re(R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)"
           R"(| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)")}},
      {"spark2_5",
       {re(R"(\p{N}{1,3})"), re("[一-龥぀-ゟ゠-ヿ]+"),
        re(R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)"
           R"(| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)"),
        re(R"(\p{N})")}},
      {"bloom", {re(R"( ?[^(\s|.,!?…。，、।۔،)]+)")}},
      {"viking", {re(R"( ?[^(\s|.,!?…。，、।۔،)]+)"), re(R"(\p{N})")}},
      {"tekken",
       {re(WEFT_CASED_WORDS("") R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)")},
       true,
       true},
      {"gpt-4o",
       {re(WEFT_CASED_WORDS(WEFT_CONTRACTIONS
                            "?") R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)")}},
      {"chameleon",
       {re("<sentinel:[0-9]+>"), re("(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z"), re(R"(([\t\n]|    |  ))"), re(R"(\p{N})"),
        re(R"([\p{P}!-/:-@\[-`{-~])"), kGpt2},
       false,
       true},
      {"seed-coder",
       {re(WEFT_CONTRACTIONS R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)")}},
      {"qwen35",
       {re(WEFT_CONTRACTIONS
           R"(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)")}},
      {"bailingmoe",
       {re(R"('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*)"
           R"(|\s*[\r\n]|\s+(?!\S)|\s+)")}},
      {"ufakzeka", {re(R"([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)")}},
      {"exaone-moe",
       {re(WEFT_CONTRACTIONS R"(|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N})"
                             R"(| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)")}},
      {"minicpm5",
       {re(R"(\p{N}{1,3})"),
        re(WEFT_CONTRACTIONS R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)")},
       true},
      {"laguna", {re(R"([^\n]+|[\n]+)"), kQwen2}},
      {"jais-2",
       {re(WEFT_CONTRACTIONS
           R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S))"
           R"(|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})")}},
      {"youtu",
       {re("[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+"),
        re(WEFT_CASED_WORDS(WEFT_CONTRACTIONS "?") R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)")},
       true},
  };
}

#undef WEFT_CASED_WORDS
#undef WEFT_CONTRACTIONS

// tokenizer.ggml.pre values (as llama.cpp's converter writes them and
// llama.cpp reads them) and the rule of each. "gpt2" is weft's own name.
constexpr std::pair<std::string_view, std::string_view> kNames[] = {
    {"gpt2", "gpt2"},
    {"gpt-2", "gpt2"},
    {"phi-2", "gpt2"},
    {"mpt", "gpt2"},
    {"olmo", "gpt2"},
    {"jais", "gpt2"},
    {"trillion", "gpt2"},
    {"granite-docling", "gpt2"},
    {"jina-es", "gpt2"},
    {"jina-de", "gpt2"},
    {"jina-v1-en", "gpt2"},
    {"jina-v2-es", "gpt2"},
    {"jina-v2-de", "gpt2"},
    {"jina-v2-code", "gpt2"},
    {"roberta-bpe", "gpt2"},
    {"gigachat", "gpt2"},
    {"a.x-4.0", "gpt2"},
    {"mellum", "gpt2"},
    {"modern-bert", "gpt2"},
    {"exaone4", "gpt2"},
    {"llama3", "llama3"},
    {"llama-v3", "llama3"},
    {"llama-bpe", "llama3"},
    {"falcon3", "llama3"},
    {"falcon-h1", "llama3"},
    {"pixtral", "llama3"},
    {"midm-2.0", "llama3"},
    {"lfm2", "llama3"},
    {"jina-v5-nano", "llama3"},
    {"dbrx", "llama3-merges"},
    {"smaug-bpe", "llama3-merges"},
    {"chatglm-bpe", "llama3-merges"},
    {"glm4", "llama3-merges"},
    {"qwen2", "qwen2"},
    {"deepseek-r1-qwen", "qwen2"},
    {"kormo", "qwen2"},
    {"f2llmv2", "qwen2"},
    {"stablelm2", "qwen2"},
    {"hunyuan", "qwen2"},
    {"solar-open", "qwen2"},
    {"megrez", "qwen2"},
    {"grok-2", "qwen2"},
    {"starcoder", "digits-gpt2"},
    {"refact", "digits-gpt2"},
    {"command-r", "digits-gpt2"},
    {"smollm", "digits-gpt2"},
    {"codeshell", "digits-gpt2"},
    {"exaone", "digits-gpt2"},
    {"minerva-7b", "digits-gpt2"},
    {"mellum2", "digits-gpt2"},
    {"falcon", "falcon"},
    {"deepseek-llm", "deepseek-llm"},
    {"deepseek-coder", "deepseek-coder"},
    {"deepseek-v3", "deepseek-v3"},
    {"hunyuan-dense", "deepseek-v3"},
    {"joyai-llm", "deepseek-v3"},
    {"hy_v4", "deepseek-v3"},
    {"spark2_5", "spark2_5"},
    {"bloom", "bloom"},
    {"poro-chat", "bloom"},
    {"gpt3-finnish", "bloom"},
    {"viking", "viking"},
    {"tekken", "tekken"},
    {"gpt-4o", "gpt-4o"},
    {"llama4", "gpt-4o"},
    {"kanana2", "gpt-4o"},
    {"talkie", "gpt-4o"},
    {"minimax-m2", "gpt-4o"},
    {"chameleon", "chameleon"},
    {"seed-coder", "seed-coder"},
    {"qwen35", "qwen35"},
    {"bailingmoe", "bailingmoe"},
    {"bailingmoe2", "bailingmoe"},
    {"llada-moe", "bailingmoe"},
    {"ufakzeka", "ufakzeka"},
    {"exaone-moe", "exaone-moe"},
    {"minicpm5", "minicpm5"},
    {"laguna", "laguna"},
    {"jais-2", "jais-2"},
    {"youtu", "youtu"},
};

const std::vector<PreTokenizerRule>& rules() {
  static const std::vector<PreTokenizerRule> all = [] {
    std::vector<PreTokenizerRule> out;
    for (RuleSpec& s : rule_specs()) {
      PreTokenizerRule r{s.name, std::move(s.steps), {}, s.ignore_merges, s.add_bos};
      for (const Step& step : r.steps) r.regexes.emplace_back(step.builtin == BuiltinSplit::none ? step.pattern : "");
      out.push_back(std::move(r));
    }
    return out;
  }();
  return all;
}

const PreTokenizerRule& rule_named(std::string_view name) {
  for (const PreTokenizerRule& r : rules())
    if (r.name == name) return r;
  return rules().front();  // not reached: kNames names rules that exist (a test checks)
}

// Splits the piece t (at offset base in the whole text) by step, appending
// [begin, end) code point ranges to out.
void split_piece(const PreTokenizerRule& rule, size_t step, std::span<const Cp> t, size_t base,
                 std::vector<std::pair<size_t, size_t>>& out) {
  const BuiltinSplit builtin = rule.steps[step].builtin;
  if (builtin != BuiltinSplit::none) {
    for (size_t i = 0; i < t.size();) {
      const size_t n = std::max<size_t>(1, match_builtin(builtin, t, i));
      out.emplace_back(base + i, base + i + n);
      i += n;
    }
    return;
  }
  const CpRegex& regex = rule.regexes[step];
  size_t gap = 0;  // where the text between matches starts
  for (size_t i = 0; i < t.size();) {
    const ptrdiff_t n = regex.match_at(t, i);
    if (n <= 0) {  // no match here (an empty match splits nothing)
      ++i;
      continue;
    }
    if (gap < i) out.emplace_back(base + gap, base + i);
    out.emplace_back(base + i, base + i + static_cast<size_t>(n));
    i += static_cast<size_t>(n);
    gap = i;
  }
  if (gap < t.size()) out.emplace_back(base + gap, base + t.size());
}

}  // namespace

const PreTokenizerRule* find_pre_tokenizer(std::string_view name) {
  for (const auto& [pre, rule] : kNames)
    if (pre == name) return &rule_named(rule);
  return nullptr;
}

const PreTokenizerRule& default_pre_tokenizer() {
  return rule_named("default");
}

const PreTokenizerRule& unknown_pre_tokenizer() {
  return rule_named("gpt2");
}

std::vector<std::pair<std::string_view, const PreTokenizerRule*>> pre_tokenizer_names() {
  std::vector<std::pair<std::string_view, const PreTokenizerRule*>> out;
  for (const auto& [pre, rule] : kNames) out.emplace_back(pre, &rule_named(rule));
  return out;
}

void for_each_piece(std::string_view text, const PreTokenizerRule& rule,
                    const std::function<void(std::string_view)>& fn) {
  const std::vector<Cp> t = split_utf8(text);
  std::vector<std::pair<size_t, size_t>> pieces, next;
  if (!t.empty()) pieces.emplace_back(0, t.size());
  for (size_t step = 0; step < rule.steps.size(); ++step) {
    next.clear();
    for (const auto& [b, e] : pieces) split_piece(rule, step, std::span<const Cp>(t).subspan(b, e - b), b, next);
    pieces.swap(next);
  }
  for (const auto& [b, e] : pieces) {
    const size_t pos = t[b].pos, end = t[e - 1].pos + t[e - 1].len;
    fn(text.substr(pos, end - pos));
  }
}

std::vector<std::string> pretokenize(std::string_view text, const PreTokenizerRule& rule) {
  std::vector<std::string> out;
  for_each_piece(text, rule, [&](std::string_view piece) { out.emplace_back(piece); });
  return out;
}

}  // namespace weft::model::detail
