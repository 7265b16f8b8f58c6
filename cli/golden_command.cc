#include "commands.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <iostream>
#include <memory>
#include <optional>

#include "options.h"
#include "posenc/error.h"
#include "ranges.h"
#include "posenc/golden.h"

namespace posenc::cli {
namespace {

struct GoldenArgs {
  ConfigArgs source;
  std::string out;
  std::optional<std::string> positions;
  std::uint64_t seed = 0;
  std::optional<std::string> image_grid, video_grid;
  std::optional<std::int64_t> shift;
  std::optional<std::string> remap;
};

constexpr const char* kRemapForms =
    "self-extend:group=G,window=W, rerope:window=W, leaky-rerope:window=W,leak=K or "
    "dual-chunk:chunk_size=C,local_size=L";

// "--remap KIND:key=value,...": every key the kind reads given once, no other key.
PositionRemap parse_remap(const std::string& text) {
  const std::string flag = "--remap '" + (text.size() > 80 ? text.substr(0, 77) + "..." : text) + "'";
  const std::size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  PositionRemap r;
  std::vector<std::string> keys;
  if (kind == "self-extend") r.kind = PositionRemapKind::kSelfExtend, keys = {"group", "window"};
  else if (kind == "rerope") r.kind = PositionRemapKind::kReRope, keys = {"window"};
  else if (kind == "leaky-rerope") r.kind = PositionRemapKind::kLeakyReRope, keys = {"window", "leak"};
  else if (kind == "dual-chunk") r.kind = PositionRemapKind::kDualChunk, keys = {"chunk_size", "local_size"};
  else throw Error(flag + ": unknown remap '" + kind + "'; expected " + kRemapForms);
  std::map<std::string, std::string> given;
  if (colon != std::string::npos)
    for (const std::string& item : split_list(text.substr(colon + 1), flag)) {
      const std::size_t eq = item.find('=');
      const std::string key = item.substr(0, eq);
      if (std::find(keys.begin(), keys.end(), key) == keys.end())
        throw Error(flag + ": '" + key + "' is not a setting of " + kind + "; expected " + kRemapForms);
      if (eq == std::string::npos) throw Error(flag + ": '" + item + "' has no value; expected " + key + "=VALUE");
      if (!given.emplace(key, item.substr(eq + 1)).second) throw Error(flag + ": " + key + " given twice");
    }
  for (const std::string& key : keys) {
    const auto it = given.find(key);
    if (it == given.end()) throw Error(flag + ": " + kind + " needs " + key + "=; expected " + kRemapForms);
    const std::string what = flag + " " + key;
    if (key == "leak") {
      char* end = nullptr;
      r.leak = std::strtod(it->second.c_str(), &end);
      if (it->second.empty() || !(std::isdigit(static_cast<unsigned char>(it->second[0])) || it->second[0] == '.') ||
          *end != '\0' || !std::isfinite(r.leak) || !(r.leak > 0))
        throw Error(what + " = '" + it->second.substr(0, 40) + "': expected a finite number > 0");
      continue;
    }
    // Digits only: parse_int_list would read "16:17" as a range and strtoll skips " " and "+".
    if (it->second.empty() || it->second.find_first_not_of("0123456789") != std::string::npos)
      throw Error(what + " = '" + it->second.substr(0, 40) + "': expected a non-negative integer");
    const std::int64_t lo = key == "group" || key == "local_size" ? 1 : key == "chunk_size" ? 2 : 0;
    const std::int64_t value = parse_int_list(it->second, what, lo, kMaxPosition, 1).at(0);
    if (key == "group") r.group = value;
    if (key == "window") r.window = value;
    if (key == "chunk_size") r.chunk_size = value;
    if (key == "local_size") r.local_size = value;
  }
  validate_remap_settings(r, "--remap");
  return r;
}

std::array<int, 3> grid_of(const std::string& text, const char* flag) {
  const auto g = parse_int_list(text, flag, 1, 4096, 3);
  if (g.size() != 3) throw Error(std::string(flag) + " takes T,H,W, got '" + text + "'");
  return {static_cast<int>(g[0]), static_cast<int>(g[1]), static_cast<int>(g[2])};
}

void run_golden(const GoldenArgs& a) {
  const ModelSpec spec = load_model_spec(a.source.config, ConfigOptions{a.source.lenient, a.source.hf_compatible});
  for (const auto& w : spec.warnings) std::cerr << "posenc: warning: " << w << "\n";
  GoldenParams params;
  params.seed = a.seed;
  // At most 4096 positions (golden.h: logits are [P, P]).
  if (a.positions) params.positions = parse_int_list(*a.positions, "--positions", 0, kMaxPosition, 4096);
  if (a.image_grid) params.image_grid = grid_of(*a.image_grid, "--image-grid");
  if (a.video_grid) params.video_grid = grid_of(*a.video_grid, "--video-grid");
  // A grid nothing reads is an error, not a silent no-op: the Qwen-VL sequences read both, HunYuan-VL's
  // only the image, the vision towers (but Llama 4's whole tile) the image's H, W.
  const bool mrope_image = spec.mrope_vision.has_value();
  const bool mrope_video = mrope_image && spec.mrope_style != MropeStyle::kXdrope;
  const bool tower_image = spec.vision_rope && spec.vision_rope->params.family != VisionRopeFamily::kLlama4;
  if (a.image_grid && !mrope_image && tower_image && params.image_grid[0] != 1)
    throw Error("--image-grid " + *a.image_grid + ": the vision tower of model_type '" + spec.rope.model_type +
                "' rotates one image of H x W patches; expected T = 1");
  if (a.image_grid && !mrope_image && !tower_image)
    throw Error("--image-grid: model_type '" + spec.rope.model_type + "' has no vision vectors that read an image grid " +
                "(M-RoPE get_rope_index or a vision tower's 2-D RoPE over the image's patches)");
  if (a.video_grid && !mrope_video)
    throw Error("--video-grid: model_type '" + spec.rope.model_type + "' has no vision vectors that read a video grid " +
                "(only the Qwen-VL families' get_rope_index does)");
  params.shift = a.shift;
  if (a.remap) params.remap = parse_remap(*a.remap);
  const Golden g = make_golden(spec, params);
  write_golden(g, a.out);
  std::printf("wrote %s/golden.safetensors (%zu tensors) and %s/manifest.json\n", a.out.c_str(),
              g.tensors.tensors.size(), a.out.c_str());
}

}  // namespace

void add_golden_command(CLI::App& app) {
  auto args = std::make_shared<GoldenArgs>();
  CLI::App* cmd = app.add_subcommand("golden", "test vectors for an engine: cos/sin, q and k before and after the "
                                               "positional treatment, logits, per layer type (safetensors + manifest)");
  add_config_options(cmd, args->source, true, "");
  add_out_option(cmd, args->out, "directory for golden.safetensors and manifest.json")->required();
  add_positions_option(cmd, args->positions, "positions 0,1,127 or A:B (half-open; default: 0,1,127,4095, the original context, 4x it, 131071)");
  add_seed_option(cmd, args->seed, "seed of q and k");
  cmd->add_option("--image-grid", args->image_grid,
                  "M-RoPE (Qwen-VL, Qwen2.5-Omni, HunYuan-VL) and the vision towers' 2-D RoPE (Pixtral, Gemma 4, MoonViT, "
                  "Qwen-VL, GLM-4V: "
                  "H x W): the image's grid T,H,W in patches for the vision vectors (default 1,4,6)");
  cmd->add_option("--shift", args->shift,
                  "also write <layer>.k_shifted: k_out re-rotated by this position delta (llama.cpp's K-shift)");
  cmd->add_option("--remap", args->remap,
                  std::string("also write <layer>.v, remap_logits and remap_out: the causal attention with RoPE's "
                              "distances remapped, in double; ") + kRemapForms);
  cmd->add_option("--video-grid", args->video_grid,
                  "M-RoPE (Qwen-VL): the video's grid T,H,W in patches for the vision vectors (default 2,4,4)");
  cmd->callback([args] { run_golden(*args); });
}

}  // namespace posenc::cli
