// What the tour and the CLI cover of issue 32's audit (tour_coverage.cc has the items).
#pragma once

#include <string>
#include <vector>

#include "tour_steps.h"

namespace posenc::cli::tour {

// The audit's words for an item (issue 32): not shown at all, shown wrongly, shown in part; and
// the errata and pictures its "What to build" asks for.
enum class Audit { kMissing, kWrong, kPartly, kErratum, kPicture };
Text audit_name(Audit a);

struct CoverageItem {
  Audit audit;
  Text item;
  const char* step;     // the tour step that shows it, or nullptr
  std::string command;  // the command that shows it (with the step, or alone; "": none)
  Text not_yet;         // what is not done (empty: nothing)
};

const std::vector<CoverageItem>& coverage();

}  // namespace posenc::cli::tour
