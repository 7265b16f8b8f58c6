#include "freqs_vision.h"

#include <cstdio>
#include <iostream>

#include "posenc/engine_json.h"
#include "posenc/error.h"
#include "posenc/model_spec.h"
#include "posenc/rope_schedule.h"
#include "posenc/vision_rope.h"

namespace posenc::cli {
namespace {

const CLI::Option* given(const std::vector<CLI::Option*>& flags, const char* name) {
  for (const CLI::Option* o : flags)
    if (o->check_name(name) && o->count() > 0) return o;
  return nullptr;
}

// --vision FAMILY: the tower from flags. HF fixes theta 10000 in the Qwen-VL and MoonViT towers'
// code and defaults Gemma 4's to 100 (Gemma4VisionConfig); a --rope-theta given here overrides both,
// as a researcher's experiment (the config reader warns instead: a shipped config cannot change it).
VisionRope from_flags(const VisionFreqsArgs& a, const VisionFreqsInput& in) {
  for (const CLI::Option* o : in.text_flags)
    if (o->count() > 0 && !o->check_name("--head-dim") && !o->check_name("--rope-theta"))
      throw Error("--vision takes --head-dim, --rope-theta, --patches-per-side and --merge-size; " + o->get_name() +
                  " is a text layer's schedule flag");
  if (!given(in.text_flags, "--head-dim")) throw Error("--vision " + a.family + " needs --head-dim");
  VisionRopeParams p;
  p.family = from_name<VisionRopeFamily>(a.family);
  p.head_dim = in.head_dim;
  p.theta = given(in.text_flags, "--rope-theta") ? in.theta : p.family == VisionRopeFamily::kGemma4 ? 100.0 : 10000.0;
  const bool has_table = p.family == VisionRopeFamily::kPixtral || p.family == VisionRopeFamily::kLlama4;
  if (a.patches_per_side && !has_table)
    throw Error("--patches-per-side is read by pixtral and llama4 (image_size / patch_size); " + a.family +
                (p.family == VisionRopeFamily::kMoonVit ? " fixes its table at 512" : " has no table"));
  if (has_table && !a.patches_per_side)
    throw Error("--vision " + a.family + " needs --patches-per-side (image_size / patch_size of its vision_config)");
  if (a.merge_size && p.family != VisionRopeFamily::kQwen2Vl)
    throw Error("--merge-size is qwen2_vl's spatial_merge_size; " + a.family + " does not read it");
  if (p.family == VisionRopeFamily::kMoonVit) p.patches_per_side = 512;
  if (a.patches_per_side) p.patches_per_side = *a.patches_per_side;
  if (a.merge_size) p.merge_size = *a.merge_size;
  return vision_rope(p);
}

// --vision --config: the config names every setting of its tower.
VisionRope from_config(const VisionFreqsArgs& a, const VisionFreqsInput& in) {
  const ConfigArgs& source = in.source;
  for (const CLI::Option* o : in.text_flags)
    if (o->count() > 0) throw Error("--vision --config reads the tower from the config; " + o->get_name() + " is not read there");
  for (const CLI::Option* o : a.own_flags)
    if (o->count() > 0) throw Error("--vision --config reads the tower from the config; " + o->get_name() + " is not read there");
  const ModelSpec s = load_model_spec(source.config, ConfigOptions{source.lenient, source.hf_compatible});
  for (const auto& w : s.warnings) std::cerr << "posenc: warning: " << w << "\n";
  if (!s.vision_rope)
    throw Error(source.config + " has no vision tower with 2-D RoPE (a vision_config of Qwen2-VL, Pixtral, Llama 4, "
                "Gemma 4 or MoonViT); without --vision, freqs shows the text layers' schedule");
  return *s.vision_rope;
}

void print_table(const VisionRope& v) {
  std::printf("vision tower: %s\nfollows %s\n", vision_rope_summary(v).c_str(), v.hf_source);
  std::printf("\n%5s  %-14s  %-6s  %-5s  %s\n", "i", "inv_freq", "axis", "block", "wavelength (patches)");
  const std::size_t per_block = v.inv_freq.size() / static_cast<std::size_t>(v.blocks);
  for (std::size_t i = 0; i < v.inv_freq.size(); ++i)
    std::printf("%5zu  %-14.8g  %-6s  %-5zu  %.6g\n", i, static_cast<double>(v.inv_freq[i]),
                v.axis_of_freq[i] == 0 ? "row" : "column", i / per_block, wavelength(v.inv_freq[i]));
}

}  // namespace

void add_vision_freqs_options(CLI::App* cmd, VisionFreqsArgs& a) {
  a.vision = cmd->add_option("--vision", a.family,
                             "the vision tower's 2-D RoPE: from --config (no value), or FAMILY (" +
                                 enum_names_joined<VisionRopeFamily>() + ") with --head-dim and --rope-theta")
                 ->expected(0, 1)
                 ->type_name("[FAMILY]");
  a.own_flags.push_back(cmd->add_option("--patches-per-side", a.patches_per_side,
                                        "with --vision pixtral|llama4: image_size / patch_size, the tower's table"));
  a.own_flags.push_back(cmd->add_option("--merge-size", a.merge_size,
                                        "with --vision qwen2_vl: spatial_merge_size (default 2), the order of its patches"));
}

bool run_vision_freqs(const VisionFreqsArgs& a, const VisionFreqsInput& in) {
  if (a.vision->count() == 0) {
    for (const CLI::Option* o : a.own_flags)
      if (o->count() > 0) throw Error(o->get_name() + " describes a vision tower: give it with --vision FAMILY");
    return false;
  }
  if (!a.family.empty() && !try_from_name<VisionRopeFamily>(a.family))
    throw Error("--vision must be one of " + enum_names_joined<VisionRopeFamily>() + " (or no value, with --config), got '" +
                a.family + "'");
  if (a.family.empty() == in.source.config.empty())
    throw Error(a.family.empty() ? "--vision without a family reads the tower from --config: give --config, or --vision FAMILY"
                                 : "--vision " + a.family + " and --config exclude each other (the config names its tower)");
  if (!in.source.layer_type.empty()) throw Error("--layer-type selects a text layer; --vision shows the tower");
  if (in.seq_len_given) throw Error("--seq-len selects a text schedule in force at a length; a vision tower's has none");
  if (!a.family.empty() && (in.source.lenient || in.source.hf_compatible))
    throw Error("--lenient and --hf-compatible read a config; --vision " + a.family + " takes none");
  const VisionRope v = a.family.empty() ? from_config(a, in) : from_flags(a, in);
  if (in.json)
    std::cout << vision_rope_json_text(v) << "\n";
  else
    print_table(v);
  return true;
}

}  // namespace posenc::cli
