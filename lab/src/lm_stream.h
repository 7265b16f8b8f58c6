// The streaming run of `lab extrapolate --stream`: a RoPE model reads long streams token by token
// through StreamingLLM's sink cache (posenc_torch/sink_cache.h), scored in bits per character.
#pragma once

#include <string>
#include <vector>

#include "lm_eval.h"
#include "posenc_torch/sink_cache.h"

namespace posenc::lab {

// The cache settings of the rows, in order: sinks + window re-rotated, the same not re-rotated,
// and the window alone (no sinks, as long as both together), each with its row label.
std::vector<std::pair<std::string, torch_layer::SinkCacheOptions>> stream_variants(const StreamSettings& s, int train_len);

// Streams of len tokens (as many as fit in max_tokens of the validation text, at least one), read
// together as a batch one token at a time through a fresh cache of options, evicting after each
// token; the score of every token, and of those at stream positions >= train_len.
Score score_stream(torch_layer::TransformerLM& model, const Corpus& corpus, int len, int train_len, long max_tokens,
                   const torch_layer::SinkCacheOptions& options);

}  // namespace posenc::lab
