// RopeParams <-> JSON: every field under its name in the field table (rope_fields.h), HF's key
// (posenc's record of a schedule, for saved models and tools; a model's config.json is read by
// hf_config.h instead).
//
//   {"rope_type": "yarn", "head_dim": 64, "partial_rotary_factor": 1, "rope_theta": 10000,
//    "factor": 4, "original_max_position_embeddings": 64, "beta_fast": 32, "beta_slow": 1,
//    "truncate": true, ...}
//
// Records written before the table named two fields otherwise ("type", "theta"): they still
// load (a record giving both spellings of one field is an error). Every field is optional on
// reading, at RopeParams' default (rope_type "default"). Unset optional fields are left out. Doubles are written with 17 significant digits, so a
// round trip is exact. Reading is strict: an unknown key, a wrong type or a bad type name is an
// error naming the key (a file from a newer posenc must not load with a field silently dropped).
#pragma once

#include <string>

#include "posenc/rope_params.h"

namespace posenc {

std::string rope_params_to_json(const RopeParams& params);
// where: the path of the object in its file, for error messages ("rope" -> "rope.factor").
RopeParams rope_params_from_json(const std::string& text, const std::string& where = "rope");

}  // namespace posenc
