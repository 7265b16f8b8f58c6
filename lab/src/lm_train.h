// Training one character-level TransformerLM for `lab extrapolate`: warm-up then cosine learning
// rate, batches that are a function of (seed, step) only, a checkpoint every checkpoint_every
// steps, so an interrupted model resumes to the numbers of an uninterrupted one.
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "lm_eval.h"
#include "posenc_lab/corpus.h"
#include "posenc_lab/extrapolate.h"

namespace posenc::lab {

// Trains (or resumes from <out>/<plan.name>.ckpt) to c.steps; returns false when *budget (steps
// left in this run, -1: no limit) ran out first. A checkpoint with another training key is an
// Error, or (restart_on_other_key) is trained over from the model's current weights. A
// non-finite loss is an Error naming the model and step.
bool train(torch_layer::TransformerLM& model, const ModelPlan& plan, const ExtrapolateConfig& c, const Corpus& corpus,
           const nlohmann::json& key, long* budget, bool restart_on_other_key = false);

}  // namespace posenc::lab
