// The keyed result cache of the lab: <out>/<model>.result.json holds a model's rows with the two
// keys that determine them. The training key is everything that determines the weights (model
// config, seed, steps, batch, learning rate, training length, the corpus's hash); the evaluation
// key is everything that determines the rows from those weights (eval lengths, extensions, eval
// text size, ...). Same keys: the rows are reused. Same training key, other evaluation key: the
// rows are recomputed from the trained weights. Another training key: an Error naming the
// settings that differ (the directory holds another experiment; nothing is overwritten).
// Each file carries a checksum of its keys and rows (an edited or damaged file is an Error; one
// from before checksums is recomputed) and of the model file its rows were computed from, so a
// saved model is re-evaluated only when it is that model.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace posenc::lab {

struct CacheKey {
  nlohmann::json train, eval;  // JSON objects
};

// The cached rows when both keys match; nullopt when the file is missing or only the evaluation
// key differs. Throws Error naming path when the training key differs or the file is corrupt.
std::optional<nlohmann::json> cached_rows(const std::string& path, const CacheKey& key);

// Writes {"key": {...}, "rows": rows, "model": model_checksum, "checksum": ...} atomically
// (model_checksum empty: no model file was saved).
void write_cached_rows(const std::string& path, const CacheKey& key, const nlohmann::json& rows,
                       const std::string& model_checksum = "");

// The checksum of the model file that path's rows were computed from ("" when none was
// recorded); throws Error as cached_rows does (training key, corruption, checksum).
std::string cached_model_checksum(const std::string& path, const CacheKey& key);

// FNV-1a of a whole file's bytes, as hex (throws Error naming path when unreadable).
std::string file_checksum(const std::string& path);

// Throws Error when saved (a training key read from path) differs from wanted, naming each
// setting that differs and the fix.
void check_training_key(const std::string& path, const nlohmann::json& saved, const nlohmann::json& wanted);

// The file's text parsed as JSON (limit 64 MiB); a corrupt, empty or truncated file is an Error
// naming it and saying to delete it.
nlohmann::json read_json_file(const std::string& path);

}  // namespace posenc::lab
