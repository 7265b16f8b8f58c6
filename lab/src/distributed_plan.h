// What every rank of one lab run must share: its plan (the command, its models and their
// settings, --distribute, the world size), compared before the ranks meet.
#pragma once

#include <string>

namespace posenc::lab {

// "" when the two plans (JSON objects) agree; else the first setting that differs (its path in
// the plan, "settings.rope.training.steps"), with both ranks' values, and what to do.
std::string plan_difference(const std::string& mine_text, int me, const std::string& theirs_text, int them);

}  // namespace posenc::lab
