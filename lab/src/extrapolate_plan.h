// The plan of `lab extrapolate`: which models it trains (one per scheme and seed, the base
// sweep, the fusion modes), the settings checked before anything is trained, and the keys that
// decide whether saved weights and rows still hold (result_cache.h).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "model_plan.h"
#include "posenc_lab/corpus.h"
#include "posenc_lab/extrapolate.h"

namespace posenc::lab {

inline constexpr int kPiScale = 4;  // PI fine-tune: 4x the training length

// Every model of the run, named, over the corpus's vocabulary (validate() checked the names).
std::vector<ModelPlan> plan_models(const ExtrapolateConfig& c, int vocab);
// Everything that determines a language model's weights (lab extrapolate's and lab passkey's).
nlohmann::json training_key(const ModelPlan& p, const TrainSettings& t, const Corpus& corpus);
// Everything that determines a model's rows from its weights.
nlohmann::json evaluation_key(const ModelPlan& p, const ExtrapolateConfig& c);
// Dynamic NTK is also scored token by token with a KV cache.
bool scores_incremental(const ExtrapolateConfig& c);
// The plain RoPE model (not a base-sweep variant) gets PI with a short fine-tune.
bool fine_tunes(const ModelPlan& p, const ExtrapolateConfig& c);
// Every setting checked before anything is trained (and before the corpus is read).
void validate(const ExtrapolateConfig& c);
// Throws Error naming c.corpus unless corpus (c.corpus, loaded; c validated) is long enough for
// every eval length and the training length.
void check_corpus(const ExtrapolateConfig& c, const Corpus& corpus);

}  // namespace posenc::lab
