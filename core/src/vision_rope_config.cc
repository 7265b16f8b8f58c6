// The vision tower's 2-D RoPE of a config.json (vision_rope.h), read from its vision_config.
#include <string>

#include "config_doc.h"
#include "json_fields.h"
#include "posenc/error.h"

namespace posenc {
namespace {

using nlohmann::json;

// The families whose tower is Qwen2-VL's VisionRotaryEmbedding over head_dim / 2 with theta 10000
// (the class default; no config key sets it) and merge-block order: modeling_qwen2_vl.py,
// modeling_qwen2_5_vl.py, modeling_qwen3_vl.py (Qwen3.5 and the MoE variants reuse it),
// modeling_glm4v.py (Glm4vVisionRotaryEmbedding, rot_pos_emb), modeling_qwen2_5_omni.py (the
// thinker's Qwen2.5-VL tower).
bool qwen_tower(const std::string& families) {
  for (const char* name :
       {"qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "glm4v", "glm4v_moe", "qwen2_5_omni"})
    if (families.find(std::string("|") + name + "|") != std::string::npos) return true;
  return false;
}

// The tower's head_dim: its config's head_dim where its class reads one (Pixtral, Gemma 4), else
// width // heads as the others compute it (a head_dim key there is not read by HF either).
int read_head_dim(const json& vc, const char* width_key, const char* heads_key, bool reads_head_dim) {
  const std::string where = "vision_config";
  if (reads_head_dim)
    if (const auto d = json_fields::integer_in(vc, "head_dim", where, 4, 65536)) return static_cast<int>(*d);
  const auto width = json_fields::integer_in(vc, width_key, where, 1, 1 << 20);
  const auto heads = json_fields::integer_in(vc, heads_key, where, 1, 1 << 16);
  if (!width || !heads)
    throw Error(std::string("vision_config needs ") + width_key + " and " + heads_key + " (or head_dim) for its 2-D RoPE");
  if (*width % *heads != 0)
    throw Error("vision_config." + std::string(width_key) + " " + std::to_string(*width) + " is not divisible by " +
                heads_key + " " + std::to_string(*heads));
  return static_cast<int>(*width / *heads);
}

// rope_parameters.rope_theta (v5), else rope_theta (v4), else the class default (10000; Gemma 4's
// vision config 100); a rope type other than default is not what these towers compute.
// Any other key of the dict (a factor in a default dict) is not read by the tower: a warning says so.
double read_theta(const json& vc, std::vector<std::string>& warnings, double absent = 10000.0) {
  const std::string where = "vision_config";
  if (const json* rp = json_fields::object(vc, "rope_parameters", where)) {
    const std::string inner = where + ".rope_parameters";
    if (const auto type = json_fields::string(*rp, "rope_type", inner); type && *type != "default")
      throw Error(inner + ".rope_type '" + *type + "': the vision towers posenc reads compute default (unscaled) RoPE");
    for (const auto& [key, value] : rp->items())
      if (key != "rope_type" && key != "rope_theta")
        warnings.push_back(inner + "." + key + " ignored: the tower's 2-D RoPE reads rope_theta only");
    if (const auto t = json_fields::positive_number(*rp, "rope_theta", inner)) return *t;
  }
  if (const auto t = json_fields::positive_number(vc, "rope_theta", where)) return *t;
  return absent;
}

// The towers whose code fixes theta 10000 (the Qwen-VL family, MoonViT): a rope key in their
// vision_config is not read, which the user is told.
void warn_fixed_theta(const json& vc, const char* who, std::vector<std::string>& warnings) {
  for (const char* key : {"rope_theta", "rope_parameters", "rope_scaling"})
    if (vc.contains(key))
      warnings.push_back("vision_config." + std::string(key) + " ignored: " + who + " fixes theta 10000 in its code");
}

int read_patches_per_side(const json& vc) {
  const std::string where = "vision_config";
  const auto image = json_fields::integer_in(vc, "image_size", where, 1, 1 << 24);
  const auto patch = json_fields::integer_in(vc, "patch_size", where, 1, 1 << 24);
  if (!image || !patch) throw Error("vision_config needs image_size and patch_size for its 2-D RoPE's table");
  if (*image / *patch < 1 || *image / *patch > 65536)
    throw Error("vision_config.image_size / patch_size is " + std::to_string(*image / *patch) +
                " patches per side; expected 1 to 65536");
  return static_cast<int>(*image / *patch);  // HF: image_size // patch_size
}

}  // namespace

std::optional<VisionRope> read_vision_rope(const ConfigDoc& doc, std::vector<std::string>& warnings) {
  const json* vc = doc.vision_config();
  if (!vc) return std::nullopt;
  const std::string type = json_fields::string(*vc, "model_type", "vision_config").value_or("");
  VisionRopeParams p;
  if (type == "pixtral") {  // PixtralVisionConfig: head_dim (default hidden_size / num_attention_heads)
    p.family = VisionRopeFamily::kPixtral;
    p.head_dim = read_head_dim(*vc, "hidden_size", "num_attention_heads", true);
    p.theta = read_theta(*vc, warnings);
    p.patches_per_side = read_patches_per_side(*vc);
  } else if (type == "llama4_vision_model") {  // Llama4VisionRotaryEmbedding: hidden_size // num_attention_heads
    p.family = VisionRopeFamily::kLlama4;
    p.head_dim = read_head_dim(*vc, "hidden_size", "num_attention_heads", false);
    p.theta = read_theta(*vc, warnings);
    p.patches_per_side = read_patches_per_side(*vc);
  } else if (type == "gemma4_vision") {  // Gemma4VisionConfig: head_dim, rope_parameters (default_theta 100)
    p.family = VisionRopeFamily::kGemma4;
    p.head_dim = read_head_dim(*vc, "hidden_size", "num_attention_heads", true);
    p.theta = read_theta(*vc, warnings, 100.0);
  } else if (type == "moonvit") {  // MoonVitEncoder: Rope2DPosEmb(hidden_size // num_attention_heads, 512, 512)
    p.family = VisionRopeFamily::kMoonVit;
    p.head_dim = read_head_dim(*vc, "hidden_size", "num_attention_heads", false);
    warn_fixed_theta(*vc, "MoonVitEncoder's Rope2DPosEmb", warnings);
    p.patches_per_side = 512;
  } else if (qwen_tower(doc.families())) {
    // Qwen2VLVisionConfig's width is embed_dim (its hidden_size is the merger's output);
    // Qwen2.5-VL's, Qwen3-VL's and GLM-4V's is hidden_size; the heads are num_heads in all.
    p.family = VisionRopeFamily::kQwen2Vl;
    p.head_dim = read_head_dim(*vc, vc->contains("embed_dim") ? "embed_dim" : "hidden_size", "num_heads", false);
    warn_fixed_theta(*vc, "the tower's VisionRotaryEmbedding", warnings);
    if (const auto m = json_fields::integer_in(*vc, "spatial_merge_size", "vision_config", 1, 64)) p.merge_size = static_cast<int>(*m);
  } else {
    return std::nullopt;
  }
  return vision_rope(p);
}

}  // namespace posenc
