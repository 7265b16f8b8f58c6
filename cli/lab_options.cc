#include "lab_options.h"

#include <filesystem>

#include "options.h"
#include "posenc_lab/corpus.h"
#include "posenc_lab/file_io.h"
#include "posenc_lab/run_settings.h"
#include "posenc_torch/model_config.h"

namespace posenc::cli {
namespace {

// A comma-separated list of names (split_list: an empty item, or an empty list, is an error
// naming the flag), each item made a T by parse (which throws naming a bad one). shown: the
// default's names.
template <typename T, typename Parse>
CLI::Option* add_name_list(CLI::App* cmd, const std::string& flag, std::vector<T>* target, const std::vector<std::string>& shown,
                           Parse parse, const std::string& help) {
  std::string joined;
  for (const auto& n : shown) joined += (joined.empty() ? "" : ",") + n;
  auto set = [target, parse, flag](const std::string& text) {
    target->clear();
    for (const auto& item : split_list(text, flag)) target->push_back(parse(item));
  };
  return cmd->add_option_function<std::string>(flag, set, help)->type_name("LIST")->default_str(joined);
}

}  // namespace

void add_size_flags(CLI::App* cmd, bool* quick, bool* full, const std::string& quick_help, const std::string& full_help) {
  CLI::Option* q = cmd->add_flag("--quick", *quick, quick_help + " (default)");
  cmd->add_flag("--full", *full, full_help)->excludes(q);
}

void add_extensions_option(CLI::App* cmd, std::vector<lab::RopeExtension>* extensions) {
  add_name_list(cmd, "--extensions", extensions, lab::extension_names(*extensions),
                [](const std::string& name) { return from_name<lab::RopeExtension>(name); },
                "RoPE extensions: " + enum_names_joined<lab::RopeExtension>(", "));
}

void add_fusions_option(CLI::App* cmd, const std::string& flag, std::vector<std::string>* fusions, const std::string& help) {
  add_name_list(cmd, flag, fusions, *fusions, [](const std::string& name) { return to_string(from_name<torch_layer::Fusion>(name)); },
                help + ": " + enum_names_joined<torch_layer::Fusion>(", "));
}

void add_remap_options(CLI::App* cmd, lab::RemapSettings* remaps) {
  add_list_option(cmd, "--remap-groups", remaps->groups, "Self-Extend's group sizes G, each >= 2 (extension self-extend)")
      ->capture_default_str();
  add_list_option(cmd, "--remap-windows", remaps->windows,
                  "the remaps' windows w, each in [1, train-len - 2] (default: train-len / 4 and train-len / 2)");
}

void add_lab_model_options(CLI::App* cmd, lab::TrainSettings* training, lab::ModelShape* shape, int* seed, bool* json) {
  add_steps_option(cmd, training->steps, "training steps per model")->capture_default_str();
  add_seed_option(cmd, *seed, "seed of the weights and the batches");
  add_threads_option(cmd, training->threads,
                     "torch threads (0: one, measured faster than two for models this small; at most this machine's "
                     "hardware threads)",
                     0, lab::max_lab_threads());
  add_out_option(cmd, training->out_dir, "output directory (checkpoints, results, pictures)")->capture_default_str();
  cmd->add_option("--layers", shape->layers, "transformer layers")->capture_default_str();
  cmd->add_option("--d-model", shape->d_model, "model width (split over the heads; an even head width)")->capture_default_str();
  add_heads_option(cmd, shape->heads, "attention heads")->capture_default_str();
  add_json_flag(cmd, *json);
}

void add_lab_run_options(CLI::App* cmd, const LabRunTargets& t, const std::string& unit) {
  add_name_list(cmd, "--schemes", t.schemes, *t.schemes, [](const std::string& name) { return name; }, "comma-separated schemes");
  cmd->add_option("--train-len", t.training->train_len, unit + " per training sequence")->capture_default_str();
  cmd->add_option("--randomize-positions", t.training->randomize_positions,
                  "train each row at a sorted random subset of positions 0..L-1 (Ruoss et al. 2023; a learned table gets L rows), "
                  "evaluate at 0..len-1; 0: off")
      ->capture_default_str()
      ->check(CLI::Validator([](std::string& v) { return v.empty() ? std::string("an empty value: give L, or 0 for off") : std::string(); },
                             "INT", "not empty"));
  add_lab_model_options(cmd, t.training, t.shape, t.seed, t.json);
  if (t.corpus) cmd->add_option("--corpus", *t.corpus, "UTF-8 text (default: the King James Bible made by `make corpus`)")->capture_default_str();
  if (t.launch) add_launch_options(cmd, t.launch);
}

void add_launch_options(CLI::App* cmd, lab::LaunchConfig* l) {
  const std::string group = "Distributed (libtorch c10d over Gloo)";
  cmd->add_option("--nproc", l->nproc, "start this many local ranks on 127.0.0.1 and wait for them")
      ->check(CLI::Range(1, lab::kMaxWorldSize))->group(group);
  cmd->add_option("--rank", l->rank, "this process's rank, one process per host (default: RANK)")
      ->check(CLI::Range(0, lab::kMaxWorldSize - 1))->group(group);
  cmd->add_option("--world-size", l->world_size, "ranks in the run (default: WORLD_SIZE, else 1)")
      ->check(CLI::Range(1, lab::kMaxWorldSize))->group(group);
  cmd->add_option("--master-addr", l->master_addr, "host of rank 0, where the ranks meet (default: MASTER_ADDR, else 127.0.0.1)")
      ->group(group);
  cmd->add_option("--master-port", l->master_port, "port of rank 0's store (default: MASTER_PORT, else 29500)")
      ->check(CLI::Range(1, 65535))->group(group);
  cmd->add_option("--dist-timeout", l->timeout_seconds, "seconds after which a silent rank is reported lost")
      ->capture_default_str()->check(CLI::Range(1, 86400))->group(group);
  cmd->add_option("--distribute", l->distribute, "data: every model on all ranks, batches split (default); models: whole models per rank")
      ->check(CLI::IsMember({"data", "models"}))->group(group);
}

bool launched_local_ranks(lab::LaunchConfig* launch, int batch, const std::string& out_dir) {
  *launch = lab::resolve_launch(*launch);
  lab::check_batch_split(*launch, batch);  // before --nproc starts a single rank
  if (!lab::starts_local_ranks(*launch)) return false;
  // An --out that exists and is no directory: make_out_dir's error, and nothing made (the ranks
  // make a new one, after checking everything else).
  if (!out_dir.empty() && std::filesystem::exists(out_dir) && !std::filesystem::is_directory(out_dir)) lab::make_out_dir(out_dir);
  lab::run_local_ranks(*launch);
  return true;
}

}  // namespace posenc::cli
