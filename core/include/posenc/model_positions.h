// Which positional scheme a model's config.json describes, before any RoPE is read: RoPE (the
// schedules of hf_config.h and the per-layer facts of model_spec.h), or one of the schemes that
// have no frequency schedule at all (issue 32: BERT, BLOOM, Falcon with alibi, T5 and Whisper
// were described as RoPE models).
//
//   learned absolute   a trained table of max positions rows added to the token embeddings
//                      (BertEmbeddings.position_embeddings, GPT2Model.wpe, WhisperDecoder)
//   sinusoidal         the fixed table of Vaswani et al. 2017 (Whisper's encoder: sinusoids())
//   ALiBi              no embedding; a per-head bias -slope_h * (i - j) on the scores (Press et
//                      al. 2022; BLOOM and Falcon: build_alibi_tensor)
//   T5 buckets         no embedding; a learned bias per (bucket of j - i, head) on the scores
//                      (Raffel et al. 2020; T5Attention._relative_position_bucket, compute_bias)
//
// Encoder-decoder models have one entry per stack (T5, Whisper). The rows of what each family
// uses live in one table (model_positions.cc), each citing its Hugging Face source.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/names.h"
#include "posenc/sinusoidal.h"
#include "posenc/t5_bias.h"

namespace posenc {

enum class PositionScheme {
  kRope,              // see ModelSpec::schedules and layers
  kLearnedAbsolute,   // rows = max positions, width = the model width
  kSinusoidal,        // rows = max positions, sinusoidal = the table's convention
  kAlibi,             // heads and their slopes
  kT5Buckets,         // heads and the buckets' parameters
};
POSENC_ENUM_NAMES(PositionScheme, "position scheme", {PositionScheme::kRope, "rope"},
                  {PositionScheme::kLearnedAbsolute, "learned_absolute"}, {PositionScheme::kSinusoidal, "sinusoidal"},
                  {PositionScheme::kAlibi, "alibi"}, {PositionScheme::kT5Buckets, "t5_relative_buckets"});

// One stack's positions (a decoder-only model has one stack, named "decoder" or "encoder").
struct PositionStack {
  std::string stack;  // "encoder", "decoder"
  PositionScheme scheme = PositionScheme::kRope;
  std::string hf_source;                  // the HF function or module that builds it
  std::optional<std::int64_t> layers;     // the stack's layer count when the config says it
  // kLearnedAbsolute, kSinusoidal: the table is [rows, width]; positions past rows - 1 have no row.
  std::int64_t rows = 0;
  int width = 0;
  SinusoidalParams sinusoidal;  // kSinusoidal: layout and frequency convention of the table
  // kAlibi, kT5Buckets: the heads of the bias.
  int heads = 0;
  std::vector<double> alibi_slopes;      // kAlibi: the paper's slopes in double (alibi_slopes())
  std::vector<float> alibi_slopes_f32;   // kAlibi: as build_alibi_tensor computes them in float32
  // kAlibi: what HF multiplies the bias by before the softmax. BLOOM adds it to q.k / sqrt(d)
  // (1); Falcon scales q.k + bias together by 1/sqrt(head_dim), so its slopes act divided by it.
  double alibi_bias_scale = 1;
  T5BucketParams buckets;                // kT5Buckets
  std::vector<std::string> facts;        // what else HF does with it, one sentence each
};

struct ModelPositions {
  std::string model_type;
  std::vector<PositionStack> stacks;     // one kRope entry for a RoPE model
  std::vector<std::string> notes;        // HF defaults taken for absent keys

  bool is_rope() const { return stacks.size() == 1 && stacks[0].scheme == PositionScheme::kRope; }
  // One line: "learned absolute positions (512 rows)", "ALiBi over 16 heads", ...
  std::string summary() const;
};

// The scheme of a config.json's model (its model_type and keys such as Falcon's `alibi`); a model
// type outside the table is RoPE (hf_config.h reads it, or refuses it). Throws posenc::Error for a
// key out of range (heads < 1, buckets that cannot all be reached) or a variant posenc does not
// describe (BERT's position_embedding_type other than "absolute"), naming the key and the value.
ModelPositions parse_model_positions(const std::string& json_text);

// The refusal of a RoPE-only reader (freqs, golden) for a model that is not RoPE: names the
// scheme and points at `posenc spec` and `posenc explain`.
std::string not_rope_message(const ModelPositions& positions);

}  // namespace posenc
