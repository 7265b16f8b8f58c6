#include "posenc/golden.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include "golden_mrope.h"
#include "golden_remap.h"
#include "posenc/error.h"
#include "posenc/file_io.h"
#include "posenc/rope_apply.h"
#include "posenc/rope_shift.h"

namespace posenc {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxPositions = 4096;  // logits are [P, P]
// What one golden run may cost, estimated before anything is allocated (issue 33: head_dim
// 65536 at 4096 positions grew to 3.3 GB before bad_alloc; head_dim 8192 ran past two minutes).
constexpr double kMaxGoldenBytes = double(std::uint64_t{1} << 30);  // tensors and their serialized copy
constexpr double kMaxGoldenProducts = double(std::uint64_t{1} << 34);  // P x P x head_dim per layer type

// Refuses a job beyond the bounds, naming the sizes that make it.
void check_golden_size(const std::vector<LayerSpec>& layers, double P, bool remap) {
  double bytes = 0, products = 0;
  std::vector<std::string> seen;
  std::string shapes;
  for (const LayerSpec& l : layers) {
    if (std::find(seen.begin(), seen.end(), l.layer_type) != seen.end()) continue;
    seen.push_back(l.layer_type);
    const double D = l.head_dim, R = l.rotary_dim;
    bytes += 2 * 4 * (4 * P * D + 2 * P * R + P * P);  // q, k, q_out, k_out, cos, sin, logits; x2 serialized
    products += P * P * D;
    if (remap && l.rope) bytes += 2 * 4 * (2 * P * D + P * P), products += P * P * D;  // v, remap_out, remap_logits
    if (const auto& x = l.indexer) {  // DeepSeek-V3.2's indexer: its own q, k, q_out, k_out, logits
      bytes += 2 * 4 * (4 * P * x->head_dim + P * P);
      products += P * P * x->head_dim;
    }
    shapes += (shapes.empty() ? "" : ", ") + std::string("head_dim ") + std::to_string(l.head_dim);
  }
  if (bytes > kMaxGoldenBytes || products > kMaxGoldenProducts)
    throw Error("golden vectors for " + format_number(P) + " positions and " + std::to_string(seen.size()) +
                " layer type(s) (" + shapes + ") need " + format_number(std::ceil(bytes / 1048576)) + " MiB and " +
                format_number(products) + " logit products; at most " + format_number(kMaxGoldenBytes / 1048576) +
                " MiB and 2^34 products: give fewer --positions");
}

// splitmix64 (Steele, Lea, Flood 2014): the same stream on every platform. Each value uses
// 24 bits, so it is exact in float32: k / 2^23 - 1 in [-1, 1).
struct SplitMix {
  std::uint64_t state;
  float next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<float>(z >> 40) / 8388608.0f - 1.0f;
  }
};

// k_out [P, D] re-rotated by delta through rope_shift, the rotated channels from the layer's offset.
F32Tensor shifted_keys(const LayerSpec& l, const RopeApplyParams& ap, const F32Tensor& k_out,
                       const std::vector<std::int64_t>& positions, std::int64_t delta) {
  for (std::int64_t p : positions)
    if (p + delta < 0 || p + delta > kMaxPosition)
      throw Error("shift " + std::to_string(delta) + " moves position " + std::to_string(p) + " to " +
                  std::to_string(p + delta) + ", outside [0, 2^31-1]");
  F32Tensor out{l.layer_type + ".k_shifted", k_out.shape, k_out.data};
  RopeShiftParams sp;
  sp.rope = ap;
  sp.rope.channel_offset = l.rotary_offset;
  sp.delta = delta;
  const int P = static_cast<int>(k_out.shape[0]), D = static_cast<int>(k_out.shape[1]);
  rope_shift(bshd(out.data.data(), RopeShape{1, P, 1, D}), sp);
  return out;
}

// DeepSeek-V3.2's indexer at the layer's cos/sin (modeling_deepseek_v32.py Indexer.forward): q and
// k [P, index_head_dim] from the layer's stream, their first rotary_dim channels rotated by
// rotate_half (not the layer's interleaved pairs), and q_out . k_out^T * index_head_dim^-0.5, the
// scores before the indexer's ReLU and per-head weights. Listed in the entry's "indexer".
json indexer_vectors(const LayerSpec& l, const std::vector<std::int64_t>& positions, const RopeSchedule& s,
                     const RopeApplyParams& ap, SplitMix& rng, std::vector<F32Tensor>& out) {
  const IndexerSpec& x = *l.indexer;
  const std::int64_t P = static_cast<std::int64_t>(positions.size()), D = x.head_dim;
  const int F = x.rotary_dim / 2;
  const std::string name = l.layer_type + ".indexer_";
  F32Tensor q{name + "q", {P, D}, {}}, k{name + "k", {P, D}, {}};
  for (std::int64_t i = 0; i < P * D; ++i) q.data.push_back(rng.next());
  for (std::int64_t i = 0; i < P * D; ++i) k.data.push_back(rng.next());
  F32Tensor q_out{name + "q_out", {P, D}, q.data}, k_out{name + "k_out", {P, D}, k.data};
  std::vector<float> c(F), sn(F);
  for (std::int64_t r = 0; r < P; ++r) {
    for (int j = 0; j < F; ++j) rope_cos_sin(s.inv_freq[j], positions[r], ap, &c[j], &sn[j]);
    const std::size_t at = r * D + x.rotary_offset;
    rope_rotate_row(&q.data[at], &q_out.data[at], c.data(), sn.data(), F, x.layout, +1);
    rope_rotate_row(&k.data[at], &k_out.data[at], c.data(), sn.data(), F, x.layout, +1);
  }
  F32Tensor logits{name + "logits", {P, P}, std::vector<float>(P * P)};
  for (std::int64_t i = 0; i < P; ++i)
    for (std::int64_t j = 0; j < P; ++j) {
      double dot = 0;
      for (std::int64_t d = 0; d < D; ++d) dot += static_cast<double>(q_out.data[i * D + d]) * k_out.data[j * D + d];
      logits.data[i * P + j] = static_cast<float>(dot * x.softmax_scale);
    }
  json entry = {{"head_dim", D},
                {"heads", x.heads},
                {"rotary_offset", x.rotary_offset},
                {"rotary_dim", x.rotary_dim},
                {"pairing", pairing_name(x.layout)},
                {"softmax_scale", x.softmax_scale},
                {"tensors", json::array()}};
  return with_tensors(std::move(entry), {&q, &k, &q_out, &k_out, &logits}, out);
}

}  // namespace

std::vector<std::int64_t> default_golden_positions(const ModelSpec& spec) {
  std::int64_t context = 4096;
  for (const LayerRope& l : spec.rope.layers) {
    if (!l.has_rope) continue;
    if (l.params.original_max_position_embeddings) context = *l.params.original_max_position_embeddings;
    else if (l.params.max_position_embeddings) context = *l.params.max_position_embeddings;
    break;
  }
  std::vector<std::int64_t> out;
  for (std::int64_t p : {std::int64_t{0}, std::int64_t{1}, std::int64_t{127}, std::int64_t{4095}, context,
                         4 * context, std::int64_t{131071}})
    if (p <= kMaxPosition && std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  return out;
}

Golden make_golden(const ModelSpec& spec, const GoldenParams& params) {
  if (!spec.positions.is_rope()) throw Error("golden vectors are RoPE's: " + not_rope_message(spec.positions));
  if (!spec.family)
    throw Error("golden vectors need the per-layer semantics of model_type '" + spec.rope.model_type +
                "', which posenc does not know (posenc spec shows its schedule)");
  // A model whose layers are alike needs no count (ModelSpec::every_layer): one layer stands for all.
  const std::vector<LayerSpec> layers = spec.every_layer ? std::vector<LayerSpec>{*spec.every_layer} : spec.layers;
  if (layers.empty()) throw Error("golden vectors need the layer list; this config has none (posenc spec says why)");
  const std::vector<std::int64_t> positions = params.positions.empty() ? default_golden_positions(spec) : params.positions;
  if (positions.size() > kMaxPositions)
    throw Error("positions: " + std::to_string(positions.size()) + " entries; at most " +
                std::to_string(kMaxPositions));
  for (std::int64_t p : positions)
    if (p < 0 || p > kMaxPosition) throw Error("positions must be in [0, 2^31-1], got " + std::to_string(p));
  const std::int64_t max_pos = *std::max_element(positions.begin(), positions.end());
  const std::int64_t P = static_cast<std::int64_t>(positions.size());
  if (params.remap) validate_remap_settings(*params.remap, "golden");
  check_golden_size(layers, static_cast<double>(P), params.remap.has_value());

  Golden g;
  json manifest = {{"format", "posenc-golden-1"},
                   {"model_type", spec.rope.model_type},
                   {"positions", positions},
                   {"seed", params.seed},
                   {"seq_len", max_pos + 1},
                   {"angles", "float32(inv_freq * float32(position)), inv_freq in HF's float32 arithmetic"},
                   {"cos_sin_order", "cat(freqs, freqs): column j and j + rotary_dim/2 hold frequency j"},
                   {"tensors_file", "golden.safetensors"},
                   {"layer_types", json::array()}};
  g.tensors.metadata["format"] = "posenc-golden-1";

  std::vector<std::string> done;
  for (const LayerSpec& l : layers) {
    if (std::find(done.begin(), done.end(), l.layer_type) != done.end()) continue;
    done.push_back(l.layer_type);
    json members = json::array();
    for (const LayerSpec& m : layers)
      if (m.layer_type == l.layer_type) members.push_back(m.index);
    if (spec.every_layer) members = "all";
    // Linear attention (Gated DeltaNet, KDA) and blocks that do not attend (convolutions, Mamba)
    // have no q.k logits and no positions: listed, with no vectors (after done.push_back, so the
    // other layer types' seeded streams stay as they were).
    if (l.attention == AttentionKind::kLinear || l.attention == AttentionKind::kNone) {
      manifest["layer_types"].push_back({{"layer_type", l.layer_type}, {"layers", members}, {"rope", false},
                                         {"attention", to_string(l.attention)}, {"tensors", json::array()}});
      continue;
    }

    const int D = l.head_dim, R = l.rotary_dim, F = R / 2;
    RopeSchedule s;
    if (l.rope) {
      // HF's float32 schedule: at p = 131071 one ulp of inv_freq moves the angle by ~4e-3 rad.
      // One prefill of seq_len tokens: Qwen-1's use_dynamic_ntk fixes its base from that length.
      s = compute_schedule(prefill_params(spec.rope.layers[l.schedule], max_pos + 1), max_pos + 1, Numerics::kHfFloat32);
      check_angle_range(s, max_pos);
    }
    RopeApplyParams ap = rope_apply_params(s, l.layout);
    ap.angles = Numerics::kHfFloat32;
    // One seeded stream per layer type, so adding a layer type does not change the others.
    SplitMix rng{params.seed ^ (0x5851F42D4C957F2Dull * (done.size()))};
    F32Tensor q{l.layer_type + ".q", {P, D}, {}}, k{l.layer_type + ".k", {P, D}, {}};
    for (std::int64_t i = 0; i < P * D; ++i) q.data.push_back(rng.next());
    for (std::int64_t i = 0; i < P * D; ++i) k.data.push_back(rng.next());
    F32Tensor q_out{l.layer_type + ".q_out", {P, D}, q.data}, k_out{l.layer_type + ".k_out", {P, D}, k.data};
    F32Tensor cos{l.layer_type + ".cos", {P, R}, std::vector<float>(P * R)};
    F32Tensor sin{l.layer_type + ".sin", {P, R}, std::vector<float>(P * R)};
    std::vector<double> query_scales;
    std::vector<float> c(F), sn(F);
    for (std::int64_t r = 0; r < P; ++r) {
      if (l.rope) {
        for (int j = 0; j < F; ++j) rope_cos_sin(s.inv_freq[j], positions[r], ap, &c[j], &sn[j]);
        for (int j = 0; j < F; ++j) {
          cos.data[r * R + j] = cos.data[r * R + j + F] = c[j];
          sin.data[r * R + j] = sin.data[r * R + j + F] = sn[j];
        }
        const std::size_t at = r * D + l.rotary_offset;
        rope_rotate_row(&q.data[at], &q_out.data[at], c.data(), sn.data(), F, ap.layout, +1);
        rope_rotate_row(&k.data[at], &k_out.data[at], c.data(), sn.data(), F, ap.layout, +1);
      }
      // The query scale multiplies the (rotated) query in float32, as HF's q * attn_scales.
      const double qs = l.query_scale.at(positions[r]);
      query_scales.push_back(qs);
      for (int d = 0; d < D; ++d) q_out.data[r * D + d] *= static_cast<float>(qs);
    }
    std::vector<F32Tensor> shifted;  // k_out after rope_shift by params.shift
    if (l.rope && params.shift) shifted.push_back(shifted_keys(l, ap, k_out, positions, *params.shift));
    F32Tensor logits{l.layer_type + ".logits", {P, P}, std::vector<float>(P * P)};
    for (std::int64_t i = 0; i < P; ++i)
      for (std::int64_t j = 0; j < P; ++j) {
        double dot = 0;  // double accumulation: the reference an engine's float32 sum is compared with
        for (int d = 0; d < D; ++d) dot += static_cast<double>(q_out.data[i * D + d]) * k_out.data[j * D + d];
        logits.data[i * P + j] = static_cast<float>(dot * l.softmax_scale);
      }

    json entry = {{"layer_type", l.layer_type},
                  {"layers", members},
                  {"rope", l.rope},
                  {"pairing", pairing_name(l.layout)},
                  {"head_dim", D},
                  {"rotary_offset", l.rotary_offset},
                  {"rotary_dim", R},
                  {"rotated_channels", l.rotated_channels},
                  {"attention_factor", l.rope ? s.attention_factor : 1.0},
                  {"softmax_scale", l.softmax_scale},
                  {"query_scale_rule", l.query_scale.name()},
                  {"query_scales", query_scales},
                  {"tensors", json::array()}};
    if (const char* order = output_order(l.layout)) entry["output_order"] = order;
    if (!shifted.empty())
      entry["k_shifted"] = {{"delta", *params.shift},
                            {"rule", "k_out rotated by delta (rope_shift: R(delta) R(p) k = R(p + delta) k, no attention "
                                     "factor again), as llama.cpp's K-shift; one float32 rounding more than k rotated at p + delta"}};
    if (l.rope && spec.rope.layers[l.schedule].ntk_prefill_length)
      entry["qwen_ntk_alpha"] = qwen_ntk_alpha(max_pos + 1, *spec.rope.layers[l.schedule].ntk_prefill_length);
    // Gemma 3n / 4: these layers attend with an earlier layer's rotated K/V (same positions,
    // same schedule, so the same k_out); member -> the layer it reads.
    json shared = json::object();
    for (const LayerSpec& m : layers)
      if (m.layer_type == l.layer_type && m.kv_shared_from) shared[std::to_string(m.index)] = *m.kv_shared_from;
    if (!shared.empty()) entry["kv_shared_from"] = shared;
    std::vector<F32Tensor> remapped;  // v, remap_logits, remap_out: listed in entry["remap"]
    if (l.rope && params.remap) {     // v from its own stream: the layer type's other vectors stay as they were
      SplitMix v_rng{params.seed ^ (0x2545F4914F6CDD1Dull * done.size())};
      const GoldenRemapInput in{&l, &s, &positions, &q, &k, &query_scales, *params.remap};
      entry["remap"] = golden_remap_vectors(in, [&v_rng] { return v_rng.next(); }, remapped);
    }
    std::vector<F32Tensor> made;
    if (l.rope) made.push_back(std::move(cos)), made.push_back(std::move(sin));
    for (F32Tensor* t : {&q, &k, &q_out, &k_out, &logits}) made.push_back(std::move(*t));
    for (F32Tensor& t : shifted) made.push_back(std::move(t));
    // Drawn after the text vectors, so those stay as they were; listed in entry["vision"].
    std::vector<F32Tensor> vision;
    if (l.rope && spec.mrope_vision)
      entry["vision"] = golden_vision_vectors(spec, l, s, ap, params, [&rng] { return rng.next(); }, vision);
    for (F32Tensor& t : made) {
      entry["tensors"].push_back(t.name);
      g.tensors.tensors.push_back(std::move(t));
    }
    for (F32Tensor& t : remapped) g.tensors.tensors.push_back(std::move(t));  // listed in entry["remap"]
    for (F32Tensor& t : vision) g.tensors.tensors.push_back(std::move(t));
    if (l.rope && l.indexer) {  // drawn last, so the layer's own vectors stay as they were
      std::vector<F32Tensor> indexer;
      entry["indexer"] = indexer_vectors(l, positions, s, ap, rng, indexer);
      for (F32Tensor& t : indexer) g.tensors.tensors.push_back(std::move(t));
    }
    manifest["layer_types"].push_back(entry);
  }
  if (spec.vision_rope) {  // its own stream, drawn last: the layer types' vectors stay as they were
    SplitMix rng{params.seed ^ 0xD1B54A32D192ED03ull};
    std::vector<F32Tensor> tower;
    manifest["vision_tower"] = golden_vision_tower_vectors(*spec.vision_rope, params, [&rng] { return rng.next(); }, tower);
    for (F32Tensor& t : tower) g.tensors.tensors.push_back(std::move(t));
  }
  g.manifest_json = manifest.dump(1) + "\n";
  return g;
}

void write_golden(const Golden& golden, const std::string& dir) {
  const bool created = ::mkdir(dir.c_str(), 0777) == 0;
  if (!created && errno != EEXIST) throw Error("cannot create directory " + dir + ": " + std::strerror(errno));
  // One set: a failed manifest must not leave new tensors beside an old manifest; nor a failed
  // write an empty directory it made.
  try {
    write_files_atomic({{dir + "/golden.safetensors", safetensors_bytes(golden.tensors)}, {dir + "/manifest.json", golden.manifest_json}});
  } catch (...) {
    if (created) ::rmdir(dir.c_str());  // empty: write_files_atomic removes its temporary files
    throw;
  }
}

}  // namespace posenc
