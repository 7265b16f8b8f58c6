// The plan of `lab passkey`: the models it trains, the keys that decide whether saved weights and
// rows still hold, and the checks before anything is trained.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "model_plan.h"
#include "posenc_lab/corpus.h"
#include "posenc_lab/passkey.h"

namespace posenc::lab {

inline constexpr int kFinetuneScale = 2;  // the fine-tune trains at 2x the training length

// The model named `name` (a scheme validate_passkey accepted) over a vocabulary of `vocab`.
ModelPlan plan_for(const std::string& name, const PasskeyConfig& c, int vocab);
// The key sentence and the question as the examples spell them (training and grid alike).
std::string task_format();
// Everything that determines a model's weights.
nlohmann::json training_key(const ModelPlan& p, const PasskeyConfig& c, const Corpus& corpus);
// Everything that determines the rows from the weights (fine-tunes included).
nlohmann::json evaluation_key(const ModelPlan& p, const PasskeyConfig& c);
// Throws Error naming c.corpus unless corpus (c.corpus, loaded; c validated) has text enough for
// the longest sequence and for the fine-tune.
void check_passkey_corpus(const PasskeyConfig& c, const Corpus& corpus);

}  // namespace posenc::lab
