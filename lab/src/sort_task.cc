#include "posenc_lab/sort_task.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "check_range.h"
#include "checkpoint.h"
#include "distributed_queue.h"
#include "distributed_run.h"
#include "posenc/error.h"
#include "posenc_lab/extrapolate.h"
#include "posenc_lab/result_cache.h"
#include "posenc_lab/results_io.h"
#include "posenc_torch/model.h"
#include "train_loop.h"

namespace posenc::lab {
namespace {

namespace fs = std::filesystem;
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

void validate(const SortConfig& c) {
  check_range("--train-len", c.train_len, 1, kMaxSortTrainLen);
  check_range("--steps", c.steps, 1, kMaxSteps);
  check_range("--threads", c.threads, 0, max_lab_threads());
  check_range("batch", c.batch, 1, 1024);
  check_range("test_sequences", c.test_sequences, 1, 1024);
  if (!(c.lr > 0 && c.lr < 1)) throw Error("lr must be in (0, 1), got " + format_number(c.lr));
  if (c.test_lens.empty()) throw Error("--test-lens is empty: give at least one test length");
  for (int len : c.test_lens) check_range("--test-lens", len, 1, kMaxSortTestLen);
  if (c.schemes.empty()) throw Error("--schemes is empty: give at least one scheme");
  for (const std::string& name : c.schemes) {
    torch_layer::language_model_scheme(name, "--schemes");
  }
}

CacheKey sort_key(const std::string& name, const SortConfig& c) {
  return {{{"format", 2}, {"task", "sort"}, {"scheme", name}, {"train_len", c.train_len}, {"steps", c.steps}, {"batch", c.batch},
           {"lr", c.lr}, {"layers", c.layers}, {"d_model", c.d_model}, {"heads", c.heads}, {"seed", c.seed}},
          {{"test_lens", c.test_lens}, {"test_sequences", c.test_sequences}}};
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

// Trains (or resumes from <out>/sort-<name>.ckpt) one model of the task; null when the budget
// ran out. world: data parallel, every rank calling this alike.
torch_layer::TransformerLM train_sort(const std::string& name, Scheme scheme, const SortConfig& c, const nlohmann::json& key, World* world) {
  torch_layer::ModelConfig mc;
  mc.vocab_size = kVocab;
  mc.d_model = c.d_model;
  mc.n_layers = c.layers;
  mc.n_heads = c.heads;
  mc.scheme = scheme;
  mc.learned_positions = 2 * c.train_len + 1;
  torch::manual_seed(static_cast<std::uint64_t>(c.seed));
  torch_layer::TransformerLM model(mc);
  const int n = c.train_len;
  TrainLoop loop;
  loop.label = "sort " + name;
  loop.checkpoint = c.out_dir + "/sort-" + name + ".ckpt";
  loop.key = key;
  loop.steps = c.steps;
  loop.lr = c.lr;
  loop.tokens_per_row = 2 * n;
  loop.world = world;
  loop.batch = [&c, n](long step) {
    return batch_of(n, c.batch, static_cast<unsigned long long>(c.seed) * 1000003ull + static_cast<unsigned long long>(step));
  };
  loop.loss = [n](torch_layer::TransformerLM& m, const torch::Tensor& x) {
    const torch::Tensor logits = m->forward(x.narrow(1, 0, 2 * n));
    // Loss on the sorted half only: targets x[n+1 .. 2n], predicted from positions n .. 2n-1.
    return torch::nn::functional::cross_entropy(logits.narrow(1, n, n).reshape({-1, kVocab}), x.narrow(1, n + 1, n).reshape({-1}));
  };
  long budget = -1;
  run_train_loop(model, loop, &budget);
  return model;
}

std::vector<SortRow> test_sort(torch_layer::TransformerLM& model, const std::string& name, Scheme scheme, const SortConfig& c) {
  torch::NoGradGuard no_grad;
  model->eval();
  std::vector<SortRow> mine;
  for (int len : c.test_lens) {
    SortRow r{name, len, true, 0, 0};
    if (scheme == Scheme::kLearned && 2 * len + 1 > model->config().learned_positions) {
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

}  // namespace

namespace {

nlohmann::json rows_json(const std::vector<SortRow>& rows) {
  nlohmann::json saved = nlohmann::json::array();
  for (const auto& r : rows)
    saved.push_back({{"scheme", r.scheme}, {"length", r.length}, {"available", r.available},
                     {"token_accuracy", std::isnan(r.token_accuracy) ? 0.0 : r.token_accuracy},
                     {"sequence_accuracy", std::isnan(r.sequence_accuracy) ? 0.0 : r.sequence_accuracy}});
  return saved;
}

// One scheme's rows: cached, or trained (data parallel over world when given) and tested on rank 0
// (the other ranks return none).
std::vector<SortRow> scheme_rows(const std::string& name, std::size_t index, const SortConfig& c, World* world) {
  const bool primary = !world || world->rank() == 0;
  const std::string tag = "posenc/sort/" + std::to_string(index) + "/";
  const Scheme scheme = from_name<Scheme>(name);
  const std::string result_path = c.out_dir + "/sort-" + name + ".result.json";
  const std::string model_path = c.out_dir + "/sort-" + name + ".pt";
  const CacheKey key = sort_key(name, c);
  std::vector<SortRow> rows;
  std::optional<nlohmann::json> cached;
  if (primary) cached = cached_rows(result_path, key);
  // Same training key, other test settings: test the saved model again; else train.
  const bool trained = primary && !cached && fs::exists(result_path) && fs::exists(model_path);
  if (world && primary) world->set(tag + "train", cached || trained ? "0" : "1");
  if (world && !primary) {
    if (world->wait_for(tag + "train", 0, "waiting for rank 0 to look up sort " + name) == "1") train_sort(name, scheme, c, key.train, world);
    return rows;
  }
  if (cached) {
    for (const auto& r : *cached) rows.push_back(sort_row_from_json(r, result_path));
    std::fprintf(stderr, "sort %s: finished earlier, reusing %s\n", name.c_str(), result_path.c_str());
    return rows;
  }
  torch_layer::TransformerLM model = trained ? load_model_file(model_path) : train_sort(name, scheme, c, key.train, world);
  if (!trained) save_model_file(model, model_path);
  rows = test_sort(model, name, scheme, c);
  write_cached_rows(result_path, key, rows_json(rows));
  return rows;
}

}  // namespace

std::vector<SortRow> run_sort(const SortConfig& c) {
  validate(c);
  torch::set_num_threads(c.threads > 0 ? c.threads : 1);
  const RunRanks run = join_run(c.launch, c.out_dir, c.batch);
  const LaunchConfig& launch = run.launch;
  World* const world = run.world.get();
  std::vector<SortRow> rows;
  if (distributes_models(launch)) {
    const auto outcomes = share_jobs(*world, c.schemes.size(), [&](std::size_t i) { return rows_json(scheme_rows(c.schemes[i], i, c, nullptr)).dump(); });
    for (std::size_t i = 0; i < outcomes.size(); ++i)
      for (const auto& r : nlohmann::json::parse(outcomes[i])) rows.push_back(sort_row_from_json(r, "sort " + c.schemes[i] + " (from its rank)"));
    return rows;
  }
  for (std::size_t i = 0; i < c.schemes.size(); ++i) {
    const auto mine = scheme_rows(c.schemes[i], i, c, world);
    rows.insert(rows.end(), mine.begin(), mine.end());
  }
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
  out << "   (token accuracy / whole sequences; trained on " << c.train_len << " digits)\n";
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
  return out.str();
}

std::string sort_json(const std::vector<SortRow>& rows, const SortConfig& c) {
  nlohmann::json j = {{"results", nlohmann::json::array()}, {"train_len", c.train_len}, {"test_lens", c.test_lens}};
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
