// A config.json read once (private to the core library): the parsed document, the text model
// inside it and the family row that says how to read it. Every reader of a config
// (hf_config.cc's rope dicts, model_layers.cc's layer rules, model_spec.cc's per-layer facts)
// takes this one document, so `posenc spec` parses the text once and looks its family up once.
//
// Multimodal wrappers (Qwen2-VL, Gemma 3, Llama 4, EXAONE 4.5) keep the decoder's keys in
// `text_config`, Qwen2.5-Omni in `thinker_config.text_config`; model() is that object when
// present, else the top level, and where() is the prefix their keys get in messages
// ("text_config.rope_theta").
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "posenc/hf_config.h"
#include "posenc/model_families.h"
#include "posenc/model_positions.h"
#include "posenc/vision_rope.h"

namespace posenc {

class ConfigDoc {
 public:
  // Refuses nesting deeper than config_text::kMaxNesting, text that is not JSON and a top level
  // that is not an object, each a posenc::Error naming what it found.
  explicit ConfigDoc(const std::string& json_text);
  ConfigDoc(const ConfigDoc&) = delete;  // model() points into top()
  ConfigDoc& operator=(const ConfigDoc&) = delete;

  const nlohmann::json& top() const { return top_; }
  const nlohmann::json& model() const { return *model_; }
  const std::string& where() const { return where_; }  // "", "text_config" or "thinker_config.text_config"
  std::string at(const std::string& key) const;        // where().key, for messages
  const std::string& model_type() const { return model_type_; }  // the top level's; "" when absent
  // '|'-bounded model_types, top level then text model: "|qwen3_vl|qwen3_vl_text|".
  const std::string& families() const { return families_; }
  const FamilyQuirks* family() const { return family_; }  // nullptr: posenc does not know it
  const FamilyQuirks& quirks() const;  // family(), or the row of HF's generic keys when unknown
  // The vision tower's config: vision_config, or Qwen2.5-Omni's thinker_config.vision_config;
  // nullptr when absent (another type is an error naming it).
  const nlohmann::json* vision_config() const;

 private:
  nlohmann::json top_;
  const nlohmann::json* model_ = nullptr;
  std::string where_, model_type_, families_;
  const FamilyQuirks* family_ = nullptr;
};

// The rope of each layer type (hf_config.cc): the rope dicts read into validated RopeParams,
// over the layer types model_layers.h derives.
ModelRope read_model_rope(const ConfigDoc& doc, const ConfigOptions& options);

// The rotated channels of the text model (hf_config_rotary.cc): partial_rotary_factor under the
// family's fraction_key (or its default), the rotary_dim key, GPT-J's and CodeGen's own rotary_dim;
// into p, with the warnings and notes into out.
void read_rotary_channels(const ConfigDoc& doc, const ConfigOptions& options, const char* fraction_key, RopeParams& p,
                          ModelRope& out);

// The vision tower's 2-D RoPE (vision_rope_config.cc): Pixtral, Llama 4 and the Qwen-VL towers;
// nullopt for a config without a vision_config or whose tower posenc does not compute.
std::optional<VisionRope> read_vision_rope(const ConfigDoc& doc, std::vector<std::string>& warnings);

// The model's positional scheme (model_positions.cc): RoPE, or the scheme that replaces it.
ModelPositions read_model_positions(const ConfigDoc& doc);

}  // namespace posenc
