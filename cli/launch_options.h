// The launcher flags of the lab's commands (--nproc, --rank, --world-size, --master-addr,
// --master-port, --dist-timeout, --distribute), declared once for all of them.
#pragma once

#include <CLI/CLI.hpp>

#include "posenc_lab/distributed.h"

namespace posenc::cli {

// Adds the flags to cmd, parsed into *launch (which must outlive cmd's callback).
void add_launch_options(CLI::App* cmd, lab::LaunchConfig* launch);

// Call first in the command's callback: *launch completed from the environment and checked (an
// Error naming a bad value). Returns true when this process started the local ranks of --nproc
// and they finished: the command's work is then done.
bool launched_local_ranks(lab::LaunchConfig* launch);

}  // namespace posenc::cli
