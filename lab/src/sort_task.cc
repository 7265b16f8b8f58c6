#include "posenc_lab/sort_task.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "check_range.h"
#include "checkpoint.h"
#include "lm_train.h"
#include "model_plan.h"
#include "run_models.h"
#include "posenc/error.h"
#include "posenc_lab/file_io.h"
#include "posenc_lab/result_cache.h"
#include "posenc_lab/results_io.h"
#include "posenc_torch/model.h"
#include "train_loop.h"

namespace posenc::lab {
namespace {

constexpr int kSeparator = 10, kVocab = 11;

torch::Tensor batch_of(int n, int count, unsigned long long seed) {
  torch::Tensor out = torch::empty({count, 2 * n + 1}, torch::kInt64);
  auto acc = out.accessor<std::int64_t, 2>();
  for (int b = 0; b < count; ++b) {
    const auto ex = sort_example(n, seed * 7919ull + static_cast<unsigned long long>(b));
    for (int i = 0; i < 2 * n + 1; ++i) acc[b][i] = ex[static_cast<std::size_t>(i)];
  }
  return out;
}

}  // namespace

std::vector<long> sort_example(int n, unsigned long long seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> digit(0, 9);
  std::vector<long> x(static_cast<std::size_t>(n));
  for (auto& d : x) d = digit(rng);
  std::vector<long> sorted = x;
  std::sort(sorted.begin(), sorted.end());
  x.push_back(kSeparator);
  x.insert(x.end(), sorted.begin(), sorted.end());
  return x;
}

namespace {

CacheKey sort_key(const std::string& name, const SortConfig& c) {
  const TrainSettings& t = c.training;
  CacheKey key{{{"format", 2}, {"task", "sort"}, {"scheme", name}, {"train_len", t.train_len}, {"steps", t.steps}, {"batch", t.batch},
                {"lr", t.lr}, {"layers", c.shape.layers}, {"d_model", c.shape.d_model}, {"heads", c.shape.heads}, {"seed", c.seed}},
               {{"test_lens", c.test_lens}, {"test_sequences", c.test_sequences}}};
  if (t.randomize_positions > 0) key.train["randomize_positions"] = t.randomize_positions;  // keys without keep their value
  return key;
}

SortRow sort_row_from_json(const nlohmann::json& r, const std::string& path) {
  try {
    SortRow row{r.at("scheme"), r.at("length"), r.at("available"), r.at("token_accuracy"), r.at("sequence_accuracy")};
    if (!row.available) row.token_accuracy = row.sequence_accuracy = std::nan("");
    return row;
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + " is corrupt (a row: " + e.what() + "); delete it to recompute");
  }
}

// Trains (or resumes from <out>/sort-<name>.ckpt) one model of the task. world: data parallel,
// every rank calling this alike.
torch_layer::TransformerLM train_sort(const std::string& name, Scheme scheme, const SortConfig& c, const nlohmann::json& key, World* world) {
  const int n = c.training.train_len;
  // A learned table as long as a whole sequence: n digits, the separator, n sorted digits.
  torch::manual_seed(static_cast<std::uint64_t>(c.seed));
  torch_layer::ModelConfig config = model_config(scheme, c.shape, 2 * n + 1, kVocab);
  config.learned_positions = position_range(c.training, 2 * n + 1);
  torch_layer::TransformerLM model(config);
  TrainLoop loop = settings_loop(c.training, "sort " + name, c.training.out_dir + "/sort-" + name + ".ckpt", key);
  loop.tokens_per_row = 2 * n;
  loop.world = world;
  loop.batch = [&c, n](long step) {
    return batch_of(n, c.training.batch, static_cast<unsigned long long>(c.seed) * 1000003ull + static_cast<unsigned long long>(step));
  };
  loop.loss = [m = model, n, &c](const torch::Tensor& x) mutable {
    const torch::Tensor logits = training_forward(m, x.narrow(1, 0, 2 * n), c.training, static_cast<std::uint64_t>(c.seed));
    // Loss on the sorted half only: targets x[n+1 .. 2n], predicted from positions n .. 2n-1.
    return torch::nn::functional::cross_entropy(logits.narrow(1, n, n).reshape({-1, kVocab}), x.narrow(1, n + 1, n).reshape({-1}));
  };
  long budget = -1;
  run_train_loop(*model, loop, &budget);
  return model;
}

std::vector<SortRow> test_sort(torch_layer::TransformerLM& model, const std::string& name, Scheme scheme, const SortConfig& c) {
  torch::NoGradGuard no_grad;
  model->eval();
  std::vector<SortRow> mine;
  for (int len : c.test_lens) {
    SortRow r{name, len, true, 0, 0};
    if (scheme == Scheme::kLearned && 2 * len > model->config().learned_positions) {  // a test forward reads 2 len positions
      r.available = false;
      r.token_accuracy = r.sequence_accuracy = std::nan("");
      mine.push_back(r);
      continue;
    }
    const torch::Tensor x = batch_of(len, c.test_sequences, 0xC0FFEEull + static_cast<unsigned long long>(len));
    const torch::Tensor predicted = model->forward(x.narrow(1, 0, 2 * len)).narrow(1, len, len).argmax(-1);
    const torch::Tensor correct = predicted.eq(x.narrow(1, len + 1, len));
    r.token_accuracy = correct.to(torch::kFloat64).mean().item<double>();
    r.sequence_accuracy = correct.all(1).to(torch::kFloat64).mean().item<double>();
    mine.push_back(r);
  }
  return mine;
}

nlohmann::json rows_json(const std::vector<SortRow>& rows) {
  nlohmann::json saved = nlohmann::json::array();
  for (const auto& r : rows)
    saved.push_back({{"scheme", r.scheme}, {"length", r.length}, {"available", r.available},
                     {"token_accuracy", std::isnan(r.token_accuracy) ? 0.0 : r.token_accuracy},
                     {"sequence_accuracy", std::isnan(r.sequence_accuracy) ? 0.0 : r.sequence_accuracy}});
  return saved;
}

}  // namespace

void validate_sort(const SortConfig& c) {
  check_range("--train-len", c.training.train_len, 1, kMaxSortTrainLen);
  if (c.training.randomize_positions != 0)  // a forward reads 2n tokens: n digits, the separator, n - 1 sorted
    check_range("--randomize-positions", c.training.randomize_positions, 2 * c.training.train_len, kMaxEvalLen);
  check_training(c.training);
  check_shape(c.shape, c.training);
  check_range("test_sequences", c.test_sequences, 1, 1024);
  if (c.test_lens.empty()) throw Error("--test-lens is empty: give at least one test length");
  for (int len : c.test_lens) check_range("--test-lens", len, 1, kMaxSortTestLen);
  check_distinct("--test-lens", c.test_lens, [](int len) { return "length " + std::to_string(len); });
  if (c.schemes.empty()) throw Error("--schemes is empty: give at least one scheme");
  for (const std::string& name : c.schemes) {
    torch_layer::language_model_scheme(name, "--schemes");
  }
  check_distinct_names("--schemes", c.schemes);
}

std::vector<SortRow> run_sort(const SortConfig& c) {
  validate_sort(c);
  const std::string& out = c.training.out_dir;
  RunHooks hooks;
  hooks.job = [&](std::size_t i) {
    const std::string& name = c.schemes[i];
    ModelJob job;
    job.label = "sort " + name;
    job.result_path = out + "/sort-" + name + ".result.json";
    job.key = sort_key(name, c);
    job.model_path = out + "/sort-" + name + ".pt";
    job.evaluates_saved_model = true;  // same training key, other test settings: the saved model is tested again
    return job;
  };
  const RunRanks run = open_run(c.training, c.launch, "lab sort", c.schemes.size(), hooks.job);
  std::vector<SortRow> rows;
  hooks.train = [&](std::size_t i, World* world, nlohmann::json*) {
    return train_sort(c.schemes[i], from_name<Scheme>(c.schemes[i]), c, sort_key(c.schemes[i], c).train, world);
  };
  hooks.evaluate = [&](std::size_t i, torch_layer::TransformerLM& model, nlohmann::json* saved) {
    for (const auto& r : rows_json(test_sort(model, c.schemes[i], from_name<Scheme>(c.schemes[i]), c))) saved->push_back(r);
    return true;
  };
  hooks.collect = [&](std::size_t, const nlohmann::json& saved, const std::string& source) {
    for (const auto& r : saved) rows.push_back(sort_row_from_json(r, source));
  };
  run_models(run, c.schemes.size(), hooks);
  if (is_primary(run.launch)) write_file_atomic(out + "/results.json", sort_json(rows, c));  // rank 0 writes the results
  return rows;
}

std::string format_sort_table(const std::vector<SortRow>& rows, const SortConfig& c) {
  std::ostringstream out;
  char buf[96];
  std::snprintf(buf, sizeof buf, "%-12s", "scheme");
  out << buf;
  for (int len : c.test_lens) {
    std::snprintf(buf, sizeof buf, "  %6d digits", len);
    out << buf;
  }
  out << "   (token accuracy / whole sequences; trained on " << c.training.train_len << " digits)\n";
  std::vector<std::string> order;
  for (const SortRow& r : rows)
    if (std::find(order.begin(), order.end(), r.scheme) == order.end()) order.push_back(r.scheme);
  for (const std::string& scheme : order) {  // each cell looked up by (scheme, length): never shifted
    std::snprintf(buf, sizeof buf, "%-12s", scheme.c_str());
    out << buf;
    for (int len : c.test_lens) {
      const auto it = std::find_if(rows.begin(), rows.end(), [&](const SortRow& r) { return r.scheme == scheme && r.length == len; });
      if (it == rows.end()) std::snprintf(buf, sizeof buf, "  %13s", "-");
      else if (!it->available) std::snprintf(buf, sizeof buf, "  %13s", "n/a");
      else std::snprintf(buf, sizeof buf, "  %5.1f%% / %3.0f%%", 100 * it->token_accuracy, 100 * it->sequence_accuracy);
      out << buf;
    }
    out << "\n";
  }
  if (c.training.randomize_positions > 0) out << randomized_positions_note(c.training) << "\n";
  return out.str();
}

std::string sort_json(const std::vector<SortRow>& rows, const SortConfig& c) {
  nlohmann::json j = {{"results", nlohmann::json::array()}, {"train_len", c.training.train_len}, {"test_lens", c.test_lens}};
  if (c.training.randomize_positions > 0) j["randomize_positions"] = c.training.randomize_positions;
  add_world_fields(&j, c.launch);
  for (const auto& r : rows)
    j["results"].push_back({{"scheme", r.scheme}, {"length", r.length}, {"available", r.available},
                            {"token_accuracy", r.available ? nlohmann::json(r.token_accuracy) : nlohmann::json(nullptr)},
                            {"sequence_accuracy", r.available ? nlohmann::json(r.sequence_accuracy) : nlohmann::json(nullptr)}});
  return j.dump(1);
}

std::vector<double> attention_weights(const HeatmapRequestAttention& r, int* size) {
  torch_layer::TransformerLM model = load_model_file(r.model_path);
  const auto& cfg = model->config();
  if (r.layer < 0 || r.layer >= cfg.n_layers) throw Error("--layer must be in [0, " + std::to_string(cfg.n_layers) + "), got " + std::to_string(r.layer));
  if (r.head < 0 || r.head >= cfg.n_heads) throw Error("--head must be in [0, " + std::to_string(cfg.n_heads) + "), got " + std::to_string(r.head));
  if (r.tokens.empty()) throw Error("attention needs at least one token");
  for (long t : r.tokens)
    if (t < 0 || t >= cfg.vocab_size) throw Error("token " + std::to_string(t) + " is outside the model's vocabulary [0, " + std::to_string(cfg.vocab_size) + ")");
  torch::NoGradGuard no_grad;
  model->eval();
  auto& attention = model->blocks[static_cast<std::size_t>(r.layer)]->attention;
  attention->record = true;
  model->forward(torch::tensor(std::vector<std::int64_t>(r.tokens.begin(), r.tokens.end()), torch::kInt64).view({1, -1}));
  const torch::Tensor w = attention->last_weights[0][r.head].to(torch::kFloat64).contiguous();
  *size = static_cast<int>(w.size(0));
  return std::vector<double>(w.data_ptr<double>(), w.data_ptr<double>() + w.numel());
}

}  // namespace posenc::lab
