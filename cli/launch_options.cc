#include "launch_options.h"

namespace posenc::cli {

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

bool launched_local_ranks(lab::LaunchConfig* launch) {
  *launch = lab::resolve_launch(*launch);
  if (!lab::starts_local_ranks(*launch)) return false;
  lab::run_local_ranks(*launch);
  return true;
}

}  // namespace posenc::cli
