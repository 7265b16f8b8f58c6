#include "posenc_lab/result_cache.h"

#include <filesystem>

#include "json_difference.h"
#include "posenc/error.h"
#include "posenc_lab/file_io.h"
#include "posenc_torch/model_config.h"

namespace posenc::lab {
namespace {

// A key written by an earlier posenc spells its model in that version's record (a version-1
// config, `theta` where the field table now writes HF's `rope_theta`, a field added since
// absent): it is compared by what it means, read and written again in today's form.
nlohmann::json in_current_form(const nlohmann::json& key) {
  if (!key.is_object() || !key.contains("model")) return key;
  nlohmann::json k = key;
  try {
    k["model"] = nlohmann::json::parse(torch_layer::config_to_json(torch_layer::config_from_json(key["model"].dump())));
  } catch (const std::exception&) {
    return key;  // not a model this version reads: the difference is reported as it stands
  }
  return k;
}

}  // namespace

nlohmann::json read_json_file(const std::string& path) {
  const std::string text = read_file(path, 64ull << 20);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + " is corrupt (" + (text.empty() ? std::string("empty") : std::string(e.what())) +
                "); delete it to recompute its rows");
  }
}

void check_training_key(const std::string& path, const nlohmann::json& saved, const nlohmann::json& wanted) {
  if (saved == wanted) return;
  const nlohmann::json then_key = in_current_form(saved);
  if (then_key == wanted) return;
  // Each setting that changed, by its path ("model.learned_positions 64 then, 128 now").
  std::string diff;
  if (then_key.is_object() && wanted.is_object()) {
    for (const JsonDifference& d : json_differences(then_key, wanted, 8))
      diff += (diff.empty() ? "" : ", ") + d.path + " " + (d.a.empty() ? "absent" : d.a) + " then, " + (d.b.empty() ? "absent" : d.b) + " now";
  }
  if (diff.size() > 600) diff = diff.substr(0, 600) + "...";
  throw Error(path + " was trained with other settings (" + (diff.empty() ? std::string("older file format") : diff) +
              "); use another --out directory, or delete it to retrain");
}

namespace {

// The checksum of what a result file asserts: its keys, its rows and the model file they came from.
std::string result_checksum(const nlohmann::json& saved) {
  const std::string text = nlohmann::json{saved.at("key"), saved.at("rows"), saved.value("model", "")}.dump();
  return hex64(fnv1a64(text.data(), text.size()));
}

// The file read and verified; nullopt when it was written before results carried a checksum
// (its rows are then recomputed, never trusted).
std::optional<nlohmann::json> verified(const std::string& path) {
  if (!std::filesystem::exists(path)) return std::nullopt;
  nlohmann::json saved = read_json_file(path);
  if (!saved.is_object() || !saved.contains("key") || !saved.contains("rows") || !saved["rows"].is_array())
    throw Error(path + " is not a result file of this posenc version (no key or rows); delete it to recompute");
  if (!saved.contains("checksum")) return std::nullopt;
  if (saved["checksum"] != result_checksum(saved))
    throw Error(path + " was changed after posenc wrote it (checksum mismatch); delete it to recompute its rows");
  return saved;
}

}  // namespace

std::optional<nlohmann::json> cached_rows(const std::string& path, const CacheKey& key) {
  const std::optional<nlohmann::json> file = verified(path);
  if (!file) return std::nullopt;
  const nlohmann::json& saved = *file;
  const nlohmann::json& k = saved["key"];
  check_training_key(path, k.value("train", nlohmann::json()), key.train);
  if (k.value("eval", nlohmann::json()) != key.eval) return std::nullopt;
  return saved["rows"];
}

std::string cached_model_checksum(const std::string& path, const CacheKey& key) {
  const std::optional<nlohmann::json> saved = verified(path);
  if (!saved) return "";
  check_training_key(path, (*saved)["key"].value("train", nlohmann::json()), key.train);
  return saved->value("model", "");
}

void write_cached_rows(const std::string& path, const CacheKey& key, const nlohmann::json& rows,
                       const std::string& model_checksum) {
  nlohmann::json saved = {{"key", {{"train", key.train}, {"eval", key.eval}}}, {"rows", rows}};
  if (!model_checksum.empty()) saved["model"] = model_checksum;
  saved["checksum"] = result_checksum(saved);
  write_file_atomic(path, saved.dump(1));
}

std::string file_checksum(const std::string& path) {
  const std::string bytes = read_file(path, 4ull << 30);
  return hex64(fnv1a64(bytes.data(), bytes.size()));
}

}  // namespace posenc::lab
