#include "posenc/model_positions.h"

#include <cmath>
#include <string_view>

#include "config_doc.h"
#include "json_fields.h"
#include "posenc/alibi.h"
#include "posenc/error.h"
#include "posenc/rope_params.h"

namespace posenc {
namespace {

namespace jf = json_fields;
using nlohmann::json;

constexpr std::int64_t kMaxWidth = 1 << 20;
constexpr std::int64_t kMaxHeads = 1 << 20;  // alibi.h's limit

// Reads one model's keys; `notes` collects the HF defaults taken for absent keys.
struct KeyReader {
  const ConfigDoc& doc;
  std::vector<std::string>& notes;

  // HF's attribute_map lets a config spell a key two ways (BloomConfig: num_attention_heads ->
  // n_head); both present and different is a config HF would read one way only: refused.
  std::int64_t integer(const char* key, const char* alias, std::int64_t lo, std::int64_t hi, std::int64_t hf_default,
                       const char* config_class) const {
    const auto a = jf::integer_in(doc.model(), key, doc.where(), lo, hi);
    const auto b = alias ? jf::integer_in(doc.model(), alias, doc.where(), lo, hi) : std::nullopt;
    if (a && b && *a != *b)
      throw Error(doc.at(key) + " " + std::to_string(*a) + " and " + doc.at(alias) + " " + std::to_string(*b) +
                  " disagree; expected one value (" + config_class + " maps one onto the other)");
    if (a) return *a;
    if (b) return *b;
    notes.push_back(doc.at(key) + " absent: " + config_class + "'s default " + std::to_string(hf_default));
    return hf_default;
  }
  std::optional<std::int64_t> layers(const char* key, const char* alias) const {
    const auto a = jf::integer_in(doc.model(), key, doc.where(), 1, 1 << 20);
    return a ? a : (alias ? jf::integer_in(doc.model(), alias, doc.where(), 1, 1 << 20) : std::nullopt);
  }
};

PositionStack learned(std::string stack, std::string source, std::int64_t rows, std::int64_t width) {
  PositionStack s;
  s.stack = std::move(stack);
  s.scheme = PositionScheme::kLearnedAbsolute;
  s.hf_source = std::move(source);
  s.rows = rows;
  s.width = static_cast<int>(width);
  s.facts.push_back("position p reads row p of the table (p from 0); a position past row " + std::to_string(rows - 1) +
                    " has no row, so the model cannot take more than " + std::to_string(rows) + " tokens");
  return s;
}

PositionStack alibi(const char* source, std::int64_t heads) {
  PositionStack s;
  s.stack = "decoder";
  s.scheme = PositionScheme::kAlibi;
  s.hf_source = source;
  s.heads = static_cast<int>(heads);
  s.alibi_slopes = alibi_slopes(s.heads);
  s.alibi_slopes_f32 = alibi_slopes_bloom_f32(s.heads);
  s.facts.push_back("slopes: c = 2^floor(log2 H) heads get 2^(-8k/c), k = 1..c; the other H - c heads the odd "
                    "terms 2^(-4k/c), k = 1, 3, 5, ... (Press et al. 2022, get_slopes; HF build_alibi_tensor, in "
                    "float32)");
  s.facts.push_back("the bias is slope_h * (key position over the non-pad tokens); softmax makes it -slope_h * (i - j) "
                    "under the causal mask; no position embedding, no length limit");
  return s;
}

PositionStack t5(const char* stack, bool bidirectional, std::int64_t heads, std::int64_t buckets,
                 std::int64_t distance, std::optional<std::int64_t> layers) {
  PositionStack s;
  s.stack = stack;
  s.scheme = PositionScheme::kT5Buckets;
  s.hf_source = "modeling_t5.py: T5Attention._relative_position_bucket and compute_bias";
  s.layers = layers;
  s.heads = static_cast<int>(heads);
  s.buckets = {static_cast<int>(buckets), static_cast<int>(distance), bidirectional};
  s.facts.push_back(bidirectional ? "bidirectional buckets: half for keys before the query, half for keys after"
                                  : "causal buckets: every future key shares the bucket of distance 0");
  s.facts.push_back("only layer 0 of the stack owns the [num_buckets, heads] table (T5Stack: "
                    "has_relative_attention_bias = i == 0); later layers reuse its bias");
  s.facts.push_back("the bias is added to the raw q.k: T5 scales scores by 1, not 1/sqrt(d_kv)");
  return s;
}

// BertConfig, GPT2Config, BloomConfig, FalconConfig, T5Config, WhisperConfig: the keys and
// defaults of the config classes (transformers v5, upstream c49429ed1f8b).
std::optional<ModelPositions> read_scheme(const ConfigDoc& doc) {
  ModelPositions m;
  m.model_type = doc.model_type();
  const KeyReader k{doc, m.notes};
  const std::string families = doc.families();
  auto is = [&](std::string_view type) { return families.find("|" + std::string(type) + "|") != std::string::npos; };
  if (is("bert")) {
    if (auto type = jf::string(doc.model(), "position_embedding_type", doc.where()); type && *type != "absolute")
      throw Error(doc.at("position_embedding_type") + " is '" + *type + "'; posenc describes BERT's \"absolute\" "
                  "table only (BertEmbeddings); expected \"absolute\"");
    PositionStack s = learned("encoder",
                              "modeling_bert.py: BertEmbeddings.position_embeddings = nn.Embedding("
                              "max_position_embeddings, hidden_size), position_ids = arange(past, past + L)",
                              k.integer("max_position_embeddings", nullptr, 1, kMaxPosition + 1, 512, "BertConfig"),
                              k.integer("hidden_size", nullptr, 1, kMaxWidth, 768, "BertConfig"));
    s.layers = k.layers("num_hidden_layers", nullptr);
    m.stacks.push_back(s);
  } else if (is("gpt2")) {
    PositionStack s = learned("decoder",
                              "modeling_gpt2.py: GPT2Model.wpe = nn.Embedding(max_position_embeddings (n_positions), "
                              "n_embd), position_ids = arange(past, past + L)",
                              k.integer("n_positions", "max_position_embeddings", 1, kMaxPosition + 1, 1024, "GPT2Config"),
                              k.integer("n_embd", "hidden_size", 1, kMaxWidth, 768, "GPT2Config"));
    s.layers = k.layers("n_layer", "num_hidden_layers");
    m.stacks.push_back(s);
  } else if (is("bloom")) {
    PositionStack s = alibi("modeling_bloom.py: build_alibi_tensor(attention_mask, num_heads, dtype)",
                            k.integer("n_head", "num_attention_heads", 1, kMaxHeads, 8, "BloomConfig"));
    s.layers = k.layers("n_layer", "num_hidden_layers");
    s.facts.push_back("BloomAttention adds the bias to q.k / sqrt(head_dim) (baddbmm with beta 1): the slopes act as they are");
    m.stacks.push_back(s);
  } else if (is("falcon") && jf::boolean(doc.model(), "alibi", doc.where()).value_or(false)) {
    const auto heads = k.integer("num_attention_heads", "n_head", 1, kMaxHeads, 71, "FalconConfig");
    const auto hidden = k.integer("hidden_size", nullptr, 1, kMaxWidth, 4544, "FalconConfig");
    if (hidden % heads != 0)
      throw Error(doc.at("hidden_size") + " " + std::to_string(hidden) + " is not a multiple of " +
                  doc.at("num_attention_heads") + " " + std::to_string(heads) + "; expected head_dim = hidden_size / heads");
    PositionStack s = alibi("modeling_falcon.py: FalconModel with config.alibi: build_alibi_tensor (Bloom's slopes, cast "
                            "to bfloat16 before the multiply) instead of the rotary embedding",
                            heads);
    s.layers = k.layers("num_hidden_layers", "n_layer");
    s.alibi_bias_scale = 1.0 / std::sqrt(static_cast<double>(hidden / heads));
    s.facts.push_back("FalconAttention scales q.k + bias together by 1/sqrt(head_dim) = " + format_number(s.alibi_bias_scale) +
                      " (attention_logits *= inv_norm_factor), so each slope acts multiplied by it; the slopes are "
                      "rounded to bfloat16 first");
    m.stacks.push_back(s);
  } else if (is("t5") || is("mt5")) {
    const auto heads = k.integer("num_heads", nullptr, 1, kMaxHeads, 8, "T5Config");
    const auto buckets = k.integer("relative_attention_num_buckets", nullptr, 1, 1 << 20, 32, "T5Config");
    const auto distance = k.integer("relative_attention_max_distance", nullptr, 1, kMaxPosition, 128, "T5Config");
    const auto layers = k.layers("num_layers", nullptr);
    // T5Config: num_decoder_layers defaults to num_layers.
    const auto decoder_layers = jf::integer_in(doc.model(), "num_decoder_layers", doc.where(), 1, 1 << 20);
    m.stacks.push_back(t5("encoder", true, heads, buckets, distance, layers));
    if (jf::boolean(doc.model(), "is_encoder_decoder", doc.where()).value_or(true))
      m.stacks.push_back(t5("decoder", false, heads, buckets, distance, decoder_layers ? decoder_layers : layers));
    for (const PositionStack& s : m.stacks) {
      try {
        validate(s.buckets);
      } catch (const Error& e) {
        throw Error(doc.at("relative_attention_num_buckets") + " " + std::to_string(buckets) + " with " +
                    doc.at("relative_attention_max_distance") + " " + std::to_string(distance) + " (" + s.stack +
                    "): " + e.what());
      }
    }
  } else if (is("whisper")) {
    const auto width = k.integer("d_model", nullptr, 1, kMaxWidth, 384, "WhisperConfig");
    if (width % 2 != 0 || width < 4)
      throw Error(doc.at("d_model") + " is " + std::to_string(width) + "; Whisper's sinusoids() needs an even "
                  "width >= 4 (HF raises ValueError for an odd one)");
    PositionStack enc;
    enc.stack = "encoder";
    enc.scheme = PositionScheme::kSinusoidal;
    enc.hf_source = "modeling_whisper.py: WhisperEncoder.embed_positions, frozen, filled by sinusoids(max_source_positions, d_model)";
    enc.rows = k.integer("max_source_positions", nullptr, 1, kMaxPosition + 1, 1500, "WhisperConfig");
    enc.width = static_cast<int>(width);
    enc.sinusoidal = {static_cast<int>(width), SinusoidalLayout::kHalves, SinusoidalFreqs::kFairseq, 10000.0};
    enc.layers = k.layers("encoder_layers", nullptr);
    enc.facts.push_back("frequencies exp(-k ln(10000) / (d/2 - 1)), [sin | cos] halves, float32; fixed, not trained; "
                        "the audio frames use rows 0 .. " + std::to_string(enc.rows - 1));
    m.stacks.push_back(enc);
    PositionStack dec = learned("decoder", "modeling_whisper.py: WhisperDecoder.embed_positions = "
                                "WhisperPositionalEmbedding(max_target_positions, d_model), rows past_key_values_length .. + L",
                                k.integer("max_target_positions", nullptr, 1, kMaxPosition + 1, 448, "WhisperConfig"), width);
    dec.layers = k.layers("decoder_layers", nullptr);
    m.stacks.push_back(dec);
  } else {
    return std::nullopt;
  }
  return m;
}

std::string stack_summary(const PositionStack& s) {
  switch (s.scheme) {
    case PositionScheme::kRope: return "RoPE";
    case PositionScheme::kLearnedAbsolute:
      return "learned absolute position embeddings (" + std::to_string(s.rows) + " rows of " + std::to_string(s.width) + ")";
    case PositionScheme::kSinusoidal:
      return "sinusoidal absolute position embeddings (" + std::to_string(s.rows) + " rows of " + std::to_string(s.width) + ")";
    case PositionScheme::kAlibi: return "ALiBi biases over " + std::to_string(s.heads) + " heads";
    case PositionScheme::kT5Buckets:
      return std::string("T5 relative position buckets (") + (s.buckets.bidirectional ? "bidirectional" : "causal") + ", " +
             std::to_string(s.buckets.num_buckets) + " buckets, max_distance " + std::to_string(s.buckets.max_distance) +
             ", " + std::to_string(s.heads) + " heads)";
  }
  return "";
}

}  // namespace

ModelPositions read_model_positions(const ConfigDoc& doc) {
  if (auto m = read_scheme(doc)) return *m;
  ModelPositions rope;
  rope.model_type = doc.model_type();
  PositionStack s;
  s.stack = "decoder";
  s.hf_source = doc.family() ? doc.family()->hf_source : "";
  rope.stacks.push_back(s);
  return rope;
}

ModelPositions parse_model_positions(const std::string& json_text) {
  const ConfigDoc doc(json_text);
  return read_model_positions(doc);
}

std::string ModelPositions::summary() const {
  std::string out;
  for (const PositionStack& s : stacks)
    out += (out.empty() ? "" : "; ") + (stacks.size() > 1 ? s.stack + ": " : "") + stack_summary(s);
  return out;
}

std::string not_rope_message(const ModelPositions& m) {
  return "model_type '" + m.model_type + "' has no rotary embedding: it uses " + m.summary() +
         ", so there is no frequency schedule; `posenc spec --config FILE` or `posenc explain --config FILE` "
         "describes its positions";
}

}  // namespace posenc
