#include "options.h"

namespace posenc::cli {

CLI::Option* add_json_flag(CLI::App* cmd, bool& json) { return cmd->add_flag("--json", json, "one JSON object on stdout"); }

ConfigGroup add_config_options(CLI::App* cmd, ConfigArgs& args, bool required, const std::string& layer_help) {
  ConfigGroup g;
  g.config = cmd->add_option("--config", args.config, "a model's config.json (Hugging Face layout)");
  if (required) g.config->required();
  g.layer_type = layer_help.empty() ? nullptr : cmd->add_option("--layer-type", args.layer_type, layer_help);
  // "" is what no --layer-type means (the full-attention layers): given, it must name a type.
  if (g.layer_type)
    g.layer_type->check(CLI::Validator(
        [](std::string& v) { return v.empty() ? std::string("an empty layer type; give one of the config's layer_types") : std::string(); },
        ""));
  g.lenient = cmd->add_flag("--lenient", args.lenient, "unknown keys inside the rope dict are warnings, not errors");
  g.hf_compatible = cmd->add_flag("--hf-compatible", args.hf_compatible,
                                  "HF's float32 arithmetic (schedule and angles) and HF's reading of the config "
                                  "(ignores DBRX attn_config.rope_theta, MiniMax rotary_dim)");
  return g;
}

}  // namespace posenc::cli
