#include "checkpoint.h"

#include <cstdio>
#include <sstream>

#include "posenc/error.h"
#include "posenc_lab/file_io.h"
#include "posenc_lab/result_cache.h"

namespace posenc::lab {
namespace {

constexpr const char* kMagic = "posenc-lab-checkpoint";
constexpr std::uint64_t kMaxCheckpointBytes = 4ull << 30;

std::string corrupt(const std::string& path, const std::string& why) {
  return path + " is corrupt (" + why.substr(0, why.find('\n')) + "); delete it to retrain from the start";
}

// The verified archive of a checkpoint file's bytes.
torch::serialize::InputArchive open_archive(const std::string& path, const std::string& bytes) {
  const std::size_t eol = bytes.find('\n');
  char magic[32] = {};
  unsigned long long size = 0;
  char sum[17] = {};
  if (eol == std::string::npos || eol > 128 ||
      std::sscanf(bytes.substr(0, eol).c_str(), "%31s 1 %llu %16s", magic, &size, sum) != 3 || std::string(magic) != kMagic)
    throw Error(corrupt(path, bytes.empty() ? "empty file" : "no checkpoint header"));
  const std::size_t payload = bytes.size() - eol - 1;
  if (payload != size)
    throw Error(corrupt(path, "truncated: " + std::to_string(payload) + " of " + std::to_string(size) + " bytes"));
  if (hex64(fnv1a64(bytes.data() + eol + 1, payload)) != sum) throw Error(corrupt(path, "checksum mismatch"));
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(bytes.data() + eol + 1, payload);
  } catch (const c10::Error& e) {
    throw Error(corrupt(path, e.what_without_backtrace()));
  }
  return archive;
}

CheckpointHeader header_of(const std::string& path, torch::serialize::InputArchive& archive) {
  c10::IValue key, step;
  try {
    archive.read("train_key", key);
    archive.read("step", step);
    CheckpointHeader h{static_cast<long>(step.toInt()), nlohmann::json::parse(key.toStringRef()), {}};
    c10::IValue losses;
    if (archive.try_read("losses", losses)) h.losses = losses.toDoubleVector();
    return h;
  } catch (const std::exception& e) {
    throw Error(corrupt(path, std::string("no training key: ") + e.what()));
  }
}

}  // namespace

void check_finite_weights(torch::nn::Module& model, const std::string& what) {
  torch::NoGradGuard no_grad;
  for (const auto& p : model.named_parameters())
    if (!torch::isfinite(p.value()).all().item<bool>())
      throw Error(what + ": weight " + p.key() + " holds NaN or infinite values");
}

void save_checkpoint(const std::string& path, torch::nn::Module& model, torch::optim::Optimizer* optimizer, long step,
                     const nlohmann::json& train_key, const std::vector<double>& losses) {
  torch::serialize::OutputArchive archive;
  archive.write("train_key", c10::IValue(train_key.dump()));
  archive.write("step", c10::IValue(static_cast<std::int64_t>(step)));
  archive.write("losses", c10::IValue(losses));
  torch::serialize::OutputArchive model_archive, optimizer_archive;
  model.save(model_archive);
  archive.write("model", model_archive);
  if (optimizer) {
    optimizer->save(optimizer_archive);
    archive.write("optimizer", optimizer_archive);
  }
  std::ostringstream payload;
  archive.save_to(payload);
  const std::string bytes = payload.str();
  const std::string header = std::string(kMagic) + " 1 " + std::to_string(bytes.size()) + " " + hex64(fnv1a64(bytes.data(), bytes.size())) + "\n";
  write_file_atomic(path, header + bytes);
}

std::string read_checkpoint_file(const std::string& path) { return read_file(path, kMaxCheckpointBytes); }

CheckpointHeader read_checkpoint_header(const std::string& path) {
  torch::serialize::InputArchive archive = open_archive(path, read_checkpoint_file(path));
  return header_of(path, archive);
}

long load_checkpoint(const std::string& path, torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                     const nlohmann::json& train_key) {
  return load_checkpoint_bytes(path, read_checkpoint_file(path), model, optimizer, train_key).step;
}

CheckpointHeader load_checkpoint_bytes(const std::string& path, const std::string& bytes, torch::nn::Module& model,
                                       torch::optim::Optimizer* optimizer, const nlohmann::json& train_key) {
  torch::serialize::InputArchive archive = open_archive(path, bytes);
  const CheckpointHeader header = header_of(path, archive);
  check_training_key(path, header.train_key, train_key);
  try {
    torch::serialize::InputArchive model_archive, optimizer_archive;
    archive.read("model", model_archive);
    model.load(model_archive);
    if (optimizer) {
      archive.read("optimizer", optimizer_archive);
      optimizer->load(optimizer_archive);
    }
  } catch (const c10::Error& e) {
    throw Error(corrupt(path, e.what_without_backtrace()));
  }
  check_finite_weights(model, path + " is corrupt; delete it to retrain from the start");
  return header;
}

void save_model_file(torch_layer::TransformerLM& model, const std::string& path) { torch_layer::save_model(model, path); }

torch_layer::TransformerLM load_model_file(const std::string& path) {
  torch_layer::TransformerLM model{nullptr};
  try {
    model = torch_layer::load_model(path);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    std::string what = e.what();
    throw Error(path + " is corrupt (" + what.substr(0, what.find('\n')) + "); delete it to retrain");
  }
  check_finite_weights(*model, path + " is corrupt; delete it to retrain");
  return model;
}

}  // namespace posenc::lab
