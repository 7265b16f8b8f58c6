// `posenc freqs --vision`: a vision tower's 2-D RoPE (vision_rope.h) -- each frequency, the axis it
// reads (row or column), its block of channels and its wavelength in patches -- from a config's
// vision_config, or from --vision FAMILY with --head-dim, --rope-theta, --patches-per-side and
// --merge-size. Text, or --json: the same object `posenc spec --json` gives as "vision_rope".
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "options.h"

namespace posenc::cli {

struct VisionFreqsArgs {
  CLI::Option* vision = nullptr;  // given: this command shows the vision tower
  std::string family;             // "": from --config
  std::optional<int> patches_per_side;
  std::optional<int> merge_size;
  std::vector<CLI::Option*> own_flags;  // --patches-per-side, --merge-size: only with --vision FAMILY
};

void add_vision_freqs_options(CLI::App* cmd, VisionFreqsArgs& args);

// `text_flags`: the text schedule's flags; of these only --head-dim and --rope-theta apply here
// (their values `head_dim`, `theta`), any other is refused by name.
struct VisionFreqsInput {
  const ConfigArgs& source;
  const std::vector<CLI::Option*>& text_flags;
  int head_dim = 0;
  double theta = 0;
  bool seq_len_given = false;
  bool json = false;
};
// False when --vision was not given (and none of its own flags: they are refused without it).
bool run_vision_freqs(const VisionFreqsArgs& args, const VisionFreqsInput& in);

}  // namespace posenc::cli
