#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "check_range.h"
#include "checkpoint.h"
#include "extrapolate_plan.h"
#include "lm_eval.h"
#include "lm_train.h"
#include "passkey_plan.h"
#include "run_models.h"
#include "passkey_score.h"
#include "posenc/error.h"
#include "posenc_lab/extrapolate.h"
#include "posenc_lab/file_io.h"
#include "posenc_lab/passkey.h"
#include "posenc_lab/progress.h"
#include "posenc_lab/result_cache.h"

namespace posenc::lab {
namespace {

using torch_layer::TransformerLM;

BatchSource mixed_batches(const PasskeyVocab& vocab, const Corpus& corpus, int len, int batch, double fraction, int seed, int distractors) {
  return [&vocab, &corpus, len, batch, fraction, seed, distractors](long step) {
    std::vector<std::int64_t> ids = passkey_mixed_batch(vocab, corpus.train, len, batch, fraction, seed, step, distractors);
    return torch::from_blob(ids.data(), {batch, len + 1}, torch::kInt64).clone();
  };
}

// The RoPE schedule of a variant at length len, for forward's rope_override (null for a model
// without RoPE). A fine-tuned variant keeps at least the scale it was tuned at (it has learned
// those positions), and grows past it as the zero-shot one does.
torch_layer::RotaryEmbedding variant_rope(const ModelPlan& p, const ExtensionVariant& v, bool finetune, int train_len, int len) {
  if (p.config.scheme != Scheme::kRope) return torch_layer::RotaryEmbedding(nullptr);
  const int at = finetune ? std::max(len, kFinetuneScale * train_len) : len;
  return extension_rope(p.config, v.extension, train_len, at);
}

torch_layer::RotaryEmbeddingImpl* pointer_of(torch_layer::RotaryEmbedding& rope) { return rope ? rope.get() : nullptr; }

nlohmann::json cell_json(const PasskeyRow& r) {
  nlohmann::json j = {{"kind", "cell"}, {"extension", r.extension}, {"finetune", r.finetune}, {"length", r.length}, {"depth", r.depth},
                      {"accuracy", r.accuracy}, {"logprob", r.logprob}, {"samples", r.samples}};
  if (r.distractors > 0) j["distractors"] = r.distractors;  // rows without keep their bytes
  return j;
}

// Every grid cell and the position curve of one variant.
void score_variant(TransformerLM& model, const ModelPlan& p, const ExtensionVariant& ext, bool finetune, const PasskeyConfig& c,
                   const PasskeyVocab& vocab, const Corpus& corpus, nlohmann::json* out) {
  const int train_len = c.training.train_len;
  const std::string& ext_name = ext.label;
  // The one-key grid, and with distractors the multi-key grid too.
  const std::vector<int> grids = c.distractors > 0 ? std::vector<int>{0, c.distractors} : std::vector<int>{0};
  // Progress in tokens scored, updated inside each cell (a long cell's samples take minutes).
  long total = 0;
  for (const int m : c.multiples) total += static_cast<long>(grids.size() * c.depths.size()) * c.samples * (long{m} * train_len);
  Progress progress("score " + variant_name(p.name, ext_name, finetune), total);
  long done = 0;
  const auto scored = [&](std::int64_t tokens) { progress.update(done += static_cast<long>(tokens), std::nan("")); };
  for (int distractors : grids)
    for (int m : c.multiples) {
      const int len = m * train_len;
      torch_layer::RotaryEmbedding rope = variant_rope(p, ext, finetune, train_len, len);  // one schedule for every depth
      const ScopedRemap remap(model, extension_remap(ext, train_len, len));
      for (double depth : c.depths) {
        const PasskeyScore s =
            score_cell(model, passkey_cell(vocab, corpus.valid, len, depth, c.samples, distractors), pointer_of(rope), scored);
        out->push_back(cell_json({p.name, "", ext_name, finetune, len, depth, s.accuracy, s.logprob, s.samples, distractors}));
      }
    }
  const int longest = train_len * *std::max_element(c.multiples.begin(), c.multiples.end());
  torch_layer::RotaryEmbedding rope = variant_rope(p, ext, finetune, train_len, longest);
  const ScopedRemap remap(model, extension_remap(ext, train_len, longest));
  out->push_back({{"kind", "curve"}, {"extension", ext_name}, {"finetune", finetune},
                  {"bits", position_bits(model, corpus.valid, longest, c.curve_chars, pointer_of(rope))}});
  progress.finish("scored");
}

// The trained RoPE model with extension ext, trained on at 2x the training length for
// finetune_steps (PI: Chen et al. 2023 tune 1000 steps, a small fraction of pre-training) on the same mix,
// at a quarter of the learning rate and half the batch (the same tokens per step). Its
// checkpoint is keyed by the base model's key: other settings train it over from the base.
bool finetune(TransformerLM* model, const ModelPlan& base, const nlohmann::json& base_key, RopeExtension ext,
              const PasskeyConfig& c, const PasskeyVocab& vocab, const Corpus& corpus, long* budget) {
  const TrainSettings& t = c.training;
  ModelPlan plan = base;
  plan.name = base.name + "-" + to_string(ext) + "-finetune";
  plan.config.rope = extension_params(base.config, ext, t.train_len, kFinetuneScale * t.train_len);
  const TrainSettings ft = finetune_settings(t, kFinetuneScale, c.finetune_steps);
  *model = TransformerLM(plan.config);
  load_checkpoint(t.out_dir + "/" + base.name + ".ckpt", **model, nullptr, base_key);
  nlohmann::json key = {{"base", base_key}, {"extension", to_string(ext)}, {"steps", ft.steps}, {"batch", ft.batch}, {"lr", ft.lr}, {"train_len", ft.train_len}};
  return train(*model, plan, ft, corpus, key, budget, true,
               mixed_batches(vocab, corpus, ft.train_len, ft.batch, c.passkey_fraction, c.seed + 1, c.distractors));
}

// The probe points measured so far live in <model>.probes.json beside the checkpoint, rewritten
// after each probe with the training key, so a run killed and resumed keeps the points of the
// steps its checkpoint holds (the points past it are measured again on the same weights).
nlohmann::json resumed_probes(const std::string& ckpt, const std::string& path, const nlohmann::json& key) {
  nlohmann::json kept = nlohmann::json::array();
  if (!std::filesystem::exists(ckpt) || !std::filesystem::exists(path)) return kept;
  const nlohmann::json saved = read_json_file(path);
  if (!saved.is_object() || saved.value("key", nlohmann::json()) != key || !saved.contains("probes") || !saved["probes"].is_array())
    return kept;  // another experiment's, or damaged: its points are measured again
  const long step = read_checkpoint_header(ckpt).step;
  for (const auto& point : saved["probes"])
    if (point.is_object() && point.value("step", step + 1) <= step) kept.push_back(point);
  return kept;
}

// Trains the base model; with probe_every, in runs of probe_every steps (each resumes from the
// checkpoint the last one left, so the weights are those of one uninterrupted run), scoring
// exact match on the 1x cells after each into *out. world (non-null): every rank calls this
// alike, training data parallel; each probes the same weights, rank 0 alone writes and reports.
bool train_probed(TransformerLM& model, const ModelPlan& p, const nlohmann::json& key, const PasskeyConfig& c, const PasskeyVocab& vocab,
                  const Corpus& corpus, long* budget, nlohmann::json* out, World* world) {
  const TrainSettings& t = c.training;
  const BatchSource batches = mixed_batches(vocab, corpus, t.train_len, t.batch, c.passkey_fraction, c.seed, c.distractors);
  *budget = rank0s_number(world, *budget, p.name + ": the steps left");  // rank 0's fine-tunes spent steps the others did not
  if (c.probe_every <= 0) return train(model, p, t, corpus, key, budget, false, batches, world);
  const bool primary = !world || world->rank() == 0;
  std::vector<PasskeyExample> probe;
  for (double depth : c.depths) {
    const std::vector<PasskeyExample> cell = passkey_cell(vocab, corpus.valid, t.train_len, depth, c.samples);
    probe.insert(probe.end(), cell.begin(), cell.end());
  }
  const std::string ckpt = t.out_dir + "/" + p.name + ".ckpt", probes_path = t.out_dir + "/" + p.name + ".probes.json";
  nlohmann::json points = primary ? resumed_probes(ckpt, probes_path, key) : nlohmann::json::array();
  if (world) points = nlohmann::json::parse(world->broadcast(points.dump(), p.name + ": handing out the probe points"));
  const auto measured = [&points](long step) { return !points.empty() && points.back().value("step", -1L) == step; };
  const auto probe_at = [&](long step) {
    const PasskeyScore s = score_cell(model, probe);
    points.push_back({{"kind", "probe"}, {"step", step}, {"accuracy", s.accuracy}, {"logprob", s.logprob}});
    if (!primary) return;
    write_file_atomic(probes_path, nlohmann::json{{"key", key}, {"probes", points}}.dump(1));
    std::fprintf(stderr, "%s: step %ld, exact match at %d: %.0f%%, log p %.2f\n", p.name.c_str(), step, t.train_len, 100 * s.accuracy,
                 s.logprob);
  };
  // The step the checkpoint holds (rank 0's file).
  const auto reached = [&] {
    return rank0s_number(world, primary && std::filesystem::exists(ckpt) ? read_checkpoint_header(ckpt).step : 0, p.name + ": the step reached");
  };
  // Runs end on multiples of probe_every, where an uninterrupted run measures, whatever step a
  // resume starts from (a periodic checkpoint, a stop); a stop between two is not a point. A run
  // killed after the checkpoint at a probe step but before that point was written: the
  // checkpoint's weights (train() resumes them and, with no steps to take, stops) give the point.
  long at = reached();
  if (at > 0 && at % c.probe_every == 0 && !measured(at)) {
    long none = 0;
    train(model, p, t, corpus, key, &none, false, batches, world);
    probe_at(at);
  }
  for (;;) {
    const long to_next = c.probe_every - at % c.probe_every;
    long run = *budget >= 0 ? std::min<long>(to_next, *budget) : to_next;
    const long asked = run;
    const bool done = train(model, p, t, corpus, key, &run, false, batches, world);
    if (*budget >= 0) *budget -= asked - run;
    at = reached();
    if (at > 0 && (at % c.probe_every == 0 || done) && !measured(at)) probe_at(at);
    if (done) {
      for (const auto& point : points) out->push_back(point);
      return true;
    }
    if (*budget == 0) return false;
  }
}

PasskeyRow row_from(const nlohmann::json& j, const ModelPlan& p, const std::string& path) {
  try {
    return {p.name, to_string(p.config.scheme), j.at("extension"), j.at("finetune"), j.at("length"), j.at("depth"),
            j.at("accuracy"), j.at("logprob"), j.at("samples"), j.value("distractors", 0)};
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + " is corrupt (a row: " + e.what() + "); delete it to recompute");
  }
}

void collect(const nlohmann::json& saved, const ModelPlan& p, const std::string& path, PasskeyResult* result) {
  for (const auto& j : saved) {
    const std::string kind = j.value("kind", "");
    if (kind == "curve")
      result->curves.push_back({p.name, j.at("extension"), j.at("finetune"), j.at("bits").get<std::vector<double>>()});
    else if (kind == "probe")
      result->probes.push_back({p.name, j.at("step"), j.at("accuracy"), j.at("logprob")});
    else
      result->rows.push_back(row_from(j, p, path));
  }
}

}  // namespace


PasskeyResult run_passkey(const PasskeyConfig& c) {
  validate_passkey(c);
  const TrainSettings& t = c.training;
  const Corpus corpus = load_corpus(c.corpus);
  check_passkey_corpus(c, corpus);
  const PasskeyVocab vocab(corpus, c.distractors > 0);
  std::vector<ModelPlan> plans;
  for (const std::string& name : c.schemes) plans.push_back(plan_for(name, c, vocab.size()));
  RunHooks hooks;
  hooks.job = [&](std::size_t i) {
    const ModelPlan& plan = plans[i];
    ModelJob job;  // the trained model is not saved: the rows are the result
    job.label = plan.name;
    job.result_path = t.out_dir + "/" + plan.name + ".passkey.json";
    job.key = {training_key(plan, c, corpus), evaluation_key(plan, c)};
    return job;
  };
  const RunRanks run = open_run(t, c.launch, "lab passkey", plans.size(), hooks.job);
  PasskeyResult result;
  result.notes.push_back("dynamic: the prompt is read in one pass, so its scale is length / train_len (NTK at that scale), "
                         "which is also the scale HF's dynamic NTK uses at prefill");
  if (std::any_of(c.extensions.begin(), c.extensions.end(), is_remap))
    result.notes.push_back("remaps, zero-shot on the model's own schedule: self-extend-gG-wW (Jin et al. 2024), rerope-wW and "
                           "leaky-rerope-wW (Su 2023); leaky's slope k = (len - 1 - w) / (train_len - 1 - w), which maps the "
                           "longest distance to train_len - 1; dual-chunk-cC-lW (An et al. 2024) with chunk_size C = train_len and "
                           "local_size W");
  if (t.randomize_positions > 0) result.notes.push_back(randomized_positions_note(t));
  long budget = c.stop_after_steps;
  hooks.train = [&](std::size_t i, World* world, nlohmann::json* rows) {
    const ModelPlan& plan = plans[i];
    torch::manual_seed(static_cast<std::uint64_t>(c.seed));
    TransformerLM model(plan.config);
    if (!train_probed(model, plan, training_key(plan, c, corpus), c, vocab, corpus, &budget, rows, world)) return TransformerLM(nullptr);
    return model;
  };
  hooks.evaluate = [&](std::size_t i, TransformerLM& model, nlohmann::json* rows) {
    const ModelPlan& plan = plans[i];
    const bool rope = plan.config.scheme == Scheme::kRope;
    const std::vector<RopeExtension> exts = rope ? c.extensions : std::vector<RopeExtension>{RopeExtension::kNone};
    for (const ExtensionVariant& v : extension_variants(exts, c.remaps, t.train_len)) score_variant(model, plan, v, false, c, vocab, corpus, rows);
    for (const RopeExtension ext : rope && c.finetune_steps > 0 ? c.extensions : std::vector<RopeExtension>{}) {
      if (ext == RopeExtension::kNone || is_remap(ext)) continue;  // a remap has no backward pass to fine-tune through
      TransformerLM tuned(nullptr);
      if (!finetune(&tuned, plan, training_key(plan, c, corpus), ext, c, vocab, corpus, &budget)) return false;
      score_variant(tuned, plan, extension_variants({ext}, c.remaps, t.train_len).front(), true, c, vocab, corpus, rows);
    }
    return true;
  };
  hooks.collect = [&](std::size_t i, const nlohmann::json& rows, const std::string& source) { collect(rows, plans[i], source, &result); };
  result.complete = run_models(run, plans.size(), hooks);
  if (!is_primary(run.launch)) return result;  // rank 0 writes the results
  write_file_atomic(t.out_dir + "/results.json", passkey_json(result, c));
  result.figures = write_passkey_figures(result, c);
  return result;
}

}  // namespace posenc::lab
