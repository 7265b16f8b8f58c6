// How fast a model trained: what the training loop leaves beside a model's checkpoint when it
// finishes, <checkpoint>.timing.json, for the leaderboard's tokens per second. It times the run
// that finished the model: a run resumed from a checkpoint times only the steps it took. Plain
// C++: no <torch/torch.h>.
#pragma once

#include <optional>
#include <string>

namespace posenc::lab {

struct TrainTiming {
  long first_step = 0;  // the step this run started from (0 unless resumed)
  long steps = 0;       // steps this run took
  long tokens = 0;      // tokens trained on in them, all ranks together
  double seconds = 0;   // wall time of those steps (the loop only: no evaluation)
  int ranks = 1;

  double tokens_per_second() const { return seconds > 0 ? static_cast<double>(tokens) / seconds : 0; }
};

// Writes <checkpoint>.timing.json (atomically, file_io.h).
void write_train_timing(const std::string& checkpoint, const TrainTiming& timing);
// The timing beside checkpoint; nullopt when there is none (a model trained before the file
// existed). A file that is there but malformed is an Error naming it.
std::optional<TrainTiming> read_train_timing(const std::string& checkpoint);

}  // namespace posenc::lab
