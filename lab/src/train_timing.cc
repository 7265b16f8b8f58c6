#include "posenc_lab/train_timing.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "posenc/error.h"
#include "posenc_lab/file_io.h"

namespace posenc::lab {
namespace {

std::string timing_path(const std::string& checkpoint) { return checkpoint + ".timing.json"; }

}  // namespace

void write_train_timing(const std::string& checkpoint, const TrainTiming& t) {
  const nlohmann::json j = {{"first_step", t.first_step}, {"steps", t.steps}, {"tokens", t.tokens}, {"seconds", t.seconds}, {"ranks", t.ranks}};
  write_file_atomic(timing_path(checkpoint), j.dump() + "\n");
}

std::optional<TrainTiming> read_train_timing(const std::string& checkpoint) {
  const std::string path = timing_path(checkpoint);
  if (!std::filesystem::exists(path)) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(read_file(path, 1 << 16));
    TrainTiming t;
    t.first_step = j.at("first_step").get<long>();
    t.steps = j.at("steps").get<long>();
    t.tokens = j.at("tokens").get<long>();
    t.seconds = j.at("seconds").get<double>();
    t.ranks = j.at("ranks").get<int>();
    if (t.steps < 0 || t.tokens < 0 || !(t.seconds >= 0) || t.ranks < 1) throw Error("a value is out of range");
    return t;
  } catch (const std::exception& e) {
    throw Error(path + ": not a training timing file (" + e.what() + "); delete it: the model then shows no training speed");
  }
}

}  // namespace posenc::lab
