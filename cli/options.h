// The options several commands share, each declared here once: its name, its help text, its
// range. Defaults come from the library's own structs (the target's value when the option is
// added), and CLI11 shows them in --help.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <limits>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "posenc/hf_config.h"
#include "posenc/names.h"
#include "posenc/numerics.h"
#include "posenc/rope_kernels.h"
#include "ranges.h"

namespace posenc::cli {

// --json: the command prints one JSON object on stdout instead of text.
CLI::Option* add_json_flag(CLI::App* cmd, bool& json);

// A model's config.json and how to read it: --config, --layer-type, --lenient, --hf-compatible.
// --hf-compatible means one thing everywhere: HF's reading of the config (hf_config.h) and HF's
// float32 arithmetic for the schedule and the angles (Numerics::kHfFloat32).
struct ConfigArgs {
  std::string config;
  std::string layer_type;  // "": the full-attention layers
  bool lenient = false;
  bool hf_compatible = false;

  Numerics numerics() const { return hf_compatible ? Numerics::kHfFloat32 : Numerics::kAccurate; }
  ModelRope load() const { return load_hf_config(config, ConfigOptions{lenient, hf_compatible}); }
};

struct ConfigGroup {
  CLI::Option *config, *layer_type, *lenient, *hf_compatible;
};
// `required`: --config must be given. `layer_help` says what --layer-type selects in this command
// ("": the command has no --layer-type, it shows every layer).
ConfigGroup add_config_options(CLI::App* cmd, ConfigArgs& args, bool required,
                               const std::string& layer_help = "layer type (default: full attention)");

// --seed, --dim: the same name and the same check everywhere; `help` says what they seed or size.
// An unsigned seed is a decimal integer that fits T: CLI11 converted --seed -1 to 2^64-1 and
// saturated --seed 18446744073709551616 (2^64) to 2^64-1, two seeds giving one stream (issue 33,
// spec-089); std::from_chars refuses both (a sign, std::errc::result_out_of_range).
template <typename T>
CLI::Option* add_seed_option(CLI::App* cmd, T& seed, const std::string& help) {
  CLI::Option* o = cmd->add_option("--seed", seed, help)->capture_default_str();
  if constexpr (std::is_unsigned_v<T>)
    o->check(CLI::Validator(
        [](std::string& v) {
          T parsed{};
          const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), parsed);
          if (!v.empty() && ec == std::errc() && end == v.data() + v.size()) return std::string();
          return "must be a decimal integer in [0, " + std::to_string(std::numeric_limits<T>::max()) + "], got " + v;
        },
        "UINT"));
  return o;
}

// A comma-separated list flag ("--positions 0,1,127"): split by split_list (an empty item is an
// error naming the flag, where CLI11's delimiter dropped it), each item converted as CLI11
// converts a T (a bad item is a posenc::Error naming it). Every list flag is added here.
template <typename T>
CLI::Option* add_list_option(CLI::App* cmd, const std::string& names, std::vector<T>& target, const std::string& help) {
  const std::string flag = names.substr(0, names.find(','));  // the first name: messages name it
  auto set = [&target, flag](const std::string& text) {
    std::vector<T> values;
    for (const std::string& item : split_list(text, flag)) {
      T v{};
      if (!CLI::detail::lexical_cast(item, v)) throw Error(flag + ": '" + item + "' is not a valid item");
      values.push_back(v);
    }
    target = std::move(values);
  };
  return cmd->add_option_function<std::string>(names, set, help + "; comma-separated")->type_name("LIST");
}
template <typename T>
CLI::Option* add_dim_option(CLI::App* cmd, T& dim, const std::string& help) {
  return cmd->add_option("--dim", dim, help)->capture_default_str()->check(CLI::PositiveNumber);
}

// --threads, checked to lie in [min_threads, max_threads] when parsed (a value outside is a usage
// error, exit 2, naming the value and the range). 100 000 threads crashed libgomp and hung
// libtorch. `help` says what the value means (e.g. "torch threads (0: default)"), and the help
// names this machine's hardware threads (more are allowed: they share the cores).
template <typename T>
CLI::Option* add_threads_option(CLI::App* cmd, T& target, const std::string& help, int min_threads = 0,
                                int max_threads = kMaxThreads) {
  const unsigned hardware = std::thread::hardware_concurrency();
  const std::string machine = hardware ? " (this machine has " + std::to_string(hardware) + "; more share its cores)" : "";
  return cmd
      ->add_option("--threads", target,
                   help + "; in [" + std::to_string(min_threads) + ", " + std::to_string(max_threads) + "]" + machine)
      ->capture_default_str()
      ->check(CLI::Range(min_threads, max_threads));
}

// An enum option spelled by the enum's name table (names.h): "--dtype f32|bf16|f16". A name
// not in the table is a posenc::Error naming it and the names allowed (exit 2). The table's
// aliases are accepted too and listed after the help ("aliases: p-rope = proportional").
template <typename E>
CLI::Option* add_enum_option(CLI::App* cmd, const std::string& flag, E& target, const std::string& help) {
  auto set = [&target, flag](const std::string& name) {
    const auto v = try_from_name<E>(name);
    if (!v) throw Error(flag + " must be one of " + enum_names_joined<E>() + ", got '" + name + "'");
    target = *v;
  };
  const std::string aliases = enum_aliases_joined<E>();
  return cmd->add_option_function<std::string>(flag, set, aliases.empty() ? help : help + " (aliases: " + aliases + ")")
      ->type_name(enum_names_joined<E>())
      ->default_str(to_string(target));
}

// Options whose name recurs across commands, one meaning each (a head count, a scheme name, a
// list of positions, ...): the name is written here once, `help` says what it is in the command.
template <typename T>
struct is_list : std::false_type {};
template <typename T>
struct is_list<std::vector<T>> : std::true_type {};
// An integer flag's type by width ("INT32"), which help shows and a value beyond it is refused
// by (cli/app.cc: "--tokens must be an integer in [-2147483648, 2147483647]").
template <typename T>
std::string integer_type_name() {
  return std::string(std::is_signed_v<T> ? "INT" : "UINT") + std::to_string(8 * sizeof(T));
}
// A vector target makes the option a list flag (add_list_option).
#define POSENC_CLI_OPTION(function, flag)                                                   \
  template <typename T>                                                                     \
  CLI::Option* function(CLI::App* cmd, T& target, const std::string& help) {                \
    if constexpr (is_list<T>::value) return add_list_option(cmd, flag, target, help);        \
    else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)                   \
      return cmd->add_option(flag, target, help)->type_name(integer_type_name<T>());        \
    else return cmd->add_option(flag, target, help);                                        \
  }
POSENC_CLI_OPTION(add_heads_option, "--heads")
POSENC_CLI_OPTION(add_head_dim_option, "--head-dim")
POSENC_CLI_OPTION(add_scheme_option, "--scheme")
POSENC_CLI_OPTION(add_schemes_option, "--schemes")
POSENC_CLI_OPTION(add_positions_option, "--positions")
POSENC_CLI_OPTION(add_base_option, "--base")
POSENC_CLI_OPTION(add_tokens_option, "--tokens")
POSENC_CLI_OPTION(add_steps_option, "--steps")
POSENC_CLI_OPTION(add_repeats_option, "--repeats")
POSENC_CLI_OPTION(add_out_option, "-o,--out")
POSENC_CLI_OPTION(add_kv_heads_option, "--kv-heads")
POSENC_CLI_OPTION(add_head_option, "--head")
POSENC_CLI_OPTION(add_max_distance_option, "--max-distance")
POSENC_CLI_OPTION(add_mrope_section_option, "--mrope-section")
#undef POSENC_CLI_OPTION

// --causal: a causal mask / decoder buckets, where the default is the other kind.
inline CLI::Option* add_causal_flag(CLI::App* cmd, bool& causal, const std::string& help) {
  return cmd->add_flag("--causal", causal, help);
}

}  // namespace posenc::cli
