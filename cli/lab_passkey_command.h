// `posenc lab passkey`: passkey retrieval across lengths and depths (lab/passkey.h).
#pragma once

#include <CLI/CLI.hpp>

namespace posenc::cli {

// Adds the `passkey` subcommand to the `lab` command.
void add_lab_passkey_command(CLI::App& lab);

}  // namespace posenc::cli
