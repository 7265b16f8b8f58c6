// The launcher contract (flags and environment) and `--nproc`: local ranks started and watched.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <thread>
#include <vector>

#include "check_range.h"
#include "distributed_world.h"
#include "posenc/error.h"
#include "posenc_lab/distributed.h"

namespace posenc::lab {
namespace {

// Whether the environment variable `name` is set to something (an empty value is unset).
bool env_given(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

// An integer from the environment variable `name`, or `fallback` when it is unset.
long env_int(const char* name, long fallback) {
  if (!env_given(name)) return fallback;
  const char* v = std::getenv(name);
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || errno != 0) throw Error(std::string(name) + "='" + v + "' is not an integer");
  return x;
}

// This program's own argument vector, as the kernel recorded it.
std::vector<std::string> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), {});
  std::vector<std::string> args;
  for (std::size_t start = 0; start < all.size();) {
    const std::size_t end = all.find('\0', start);
    args.push_back(all.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (args.empty()) throw Error("cannot read this program's arguments from /proc/self/cmdline to start local ranks");
  return args;
}

std::string how_it_ended(int status) {
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

LaunchConfig resolve_launch(LaunchConfig l) {
  if (l.resolved) return l;
  l.resolved = true;
  check_range("--nproc", l.nproc, 0, kMaxWorldSize);
  check_range("--dist-timeout", l.timeout_seconds, 1, 86400);
  if (!l.distribute.empty() && l.distribute != "data" && l.distribute != "models")
    throw Error("--distribute must be data or models, got '" + l.distribute + "'");
  const bool rank_flags = l.rank >= 0 || l.world_size > 0;
  const long env_rank = env_int("RANK", -1), env_world = env_int("WORLD_SIZE", 0);
  // Set, WORLD_SIZE is a size like --world-size's (0 is not "absent").
  if (l.world_size <= 0 && env_given("WORLD_SIZE")) check_range("WORLD_SIZE", env_world, 1, kMaxWorldSize);
  if (l.nproc > 1 && rank_flags)
    throw Error("--nproc starts local ranks itself; --rank and --world-size are for one process per rank: give one or the other");
  // Its ranks meet at the store it hosts on 127.0.0.1 at a free port (MASTER_ADDR, MASTER_PORT in
  // their environment), which these flags, repeated to every rank, would override.
  if (l.nproc > 1 && (l.master_port >= 0 || !l.master_addr.empty()))
    throw Error(std::string("--nproc hosts its ranks' store on 127.0.0.1 at a free port; ") +
                (l.master_port >= 0 ? "--master-port " + std::to_string(l.master_port) : "--master-addr '" + l.master_addr + "'") +
                " is for one process per host (--rank, --world-size): leave it out");
  // Clamped to int only: a RANK of 5000 is reported as 5000 by the range checks below.
  constexpr long kIntMax = std::numeric_limits<int>::max();
  if (l.rank < 0) l.rank = static_cast<int>(std::max(-1L, std::min<long>(env_rank, kIntMax)));
  if (l.world_size <= 0) l.world_size = static_cast<int>(std::max(0L, std::min<long>(env_world, kIntMax)));
  if (l.nproc > 1) {
    if (l.rank < 0) return l;  // the launcher: its ranks are started with RANK and WORLD_SIZE set
    // A rank this program started has POSENC_STORE_HOSTED too; RANK alone is another launcher's
    // (torchrun): --nproc would then wait as one rank of a run nobody else starts.
    if (env_int("POSENC_STORE_HOSTED", 0) != 1)
      throw Error("--nproc " + std::to_string(l.nproc) + " starts its own ranks, but RANK=" + std::to_string(l.rank) +
                  " is set in the environment (a launcher such as torchrun starts one process per rank): "
                  "unset RANK and WORLD_SIZE, or leave out --nproc");
    if (l.world_size != l.nproc)
      throw Error("--nproc " + std::to_string(l.nproc) + " disagrees with WORLD_SIZE=" + std::to_string(l.world_size) +
                  " of this rank; unset WORLD_SIZE or leave out --nproc");
  }
  if (l.world_size == 0) l.world_size = l.rank >= 0 ? 0 : 1;
  if (l.world_size == 0) throw Error("rank " + std::to_string(l.rank) + " needs a world size: give --world-size (or WORLD_SIZE)");
  check_range("--world-size (WORLD_SIZE)", l.world_size, 1, kMaxWorldSize);
  if (l.world_size > 1 && l.rank < 0) throw Error("--world-size " + std::to_string(l.world_size) + " needs --rank (or RANK) of this process");
  if (l.rank >= l.world_size)
    throw Error("--rank (RANK) must be in [0, " + std::to_string(l.world_size - 1) + "] for world size " + std::to_string(l.world_size) +
                ", got " + std::to_string(l.rank));
  if (l.world_size == 1) l.rank = 0;
  if (l.master_addr.empty()) {
    const char* a = std::getenv("MASTER_ADDR");
    l.master_addr = a && *a ? a : "127.0.0.1";
  }
  if (l.master_port < 0) l.master_port = static_cast<int>(env_int("MASTER_PORT", 29500));
  check_range("--master-port (MASTER_PORT)", l.master_port, 1, 65535);
  l.store_hosted = l.store_hosted || env_int("POSENC_STORE_HOSTED", 0) == 1;
  return l;
}

bool starts_local_ranks(const LaunchConfig& l) { return l.nproc > 1 && l.rank < 0; }

void check_batch_split(const LaunchConfig& l, int batch) {
  const int ranks = starts_local_ranks(l) ? l.nproc : world_size_of(l);
  if (ranks > 1 && l.distribute != "models" && batch < ranks)
    throw Error("a batch of " + std::to_string(batch) + " rows cannot be split across " + std::to_string(ranks) +
                " ranks: give at least one row per rank, or --distribute models");
}

void run_local_ranks(const LaunchConfig& l) {
  // The store lives in this process for the whole run: a free port without a race, and it
  // outlives any one rank, so the others can still name the one that was lost.
  int port = 0;
  const auto store = host_store("127.0.0.1", &port, l.timeout_seconds);
  const std::vector<std::string> args = own_arguments();
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < l.nproc; ++r) {
    // The environment is built before fork: the child only calls exec.
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      const std::string v = *e;
      for (const char* k : {"RANK=", "LOCAL_RANK=", "WORLD_SIZE=", "MASTER_ADDR=", "MASTER_PORT=", "POSENC_STORE_HOSTED="})
        if (v.rfind(k, 0) == 0) goto skip;
      env.push_back(v);
    skip:;
    }
    env.insert(env.end(), {"RANK=" + std::to_string(r), "LOCAL_RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(l.nproc),
                           "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port), "POSENC_STORE_HOSTED=1"});
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) throw Error(std::string("cannot start rank ") + std::to_string(r) + ": fork failed: " + std::strerror(errno));
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // a killed launcher takes its ranks with it
      execve("/proc/self/exe", argv.data(), envp.data());
      _exit(127);
    }
    pids.push_back(pid);
  }
  std::vector<std::string> failures;
  std::vector<bool> done(pids.size(), false);
  std::size_t left = pids.size();
  std::chrono::steady_clock::time_point deadline{};
  while (left > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (std::size_t r = 0; r < pids.size(); ++r) {
        if (pids[r] != pid) continue;
        done[r] = true;
        --left;
        if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
          failures.push_back("rank " + std::to_string(r) + " " + how_it_ended(status));
          if (deadline == std::chrono::steady_clock::time_point{})
            deadline = std::chrono::steady_clock::now() + std::chrono::seconds(l.timeout_seconds + 10);
        }
      }
      continue;
    }
    if (deadline != std::chrono::steady_clock::time_point{} && std::chrono::steady_clock::now() > deadline) {
      for (std::size_t r = 0; r < pids.size(); ++r)
        if (!done[r]) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], &status, 0);
          done[r] = true;
          --left;
          failures.push_back("rank " + std::to_string(r) + " did not stop after the others failed and was killed");
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (failures.empty()) return;
  std::string what = "of " + std::to_string(l.nproc) + " local ranks, ";
  for (std::size_t i = 0; i < failures.size(); ++i) what += (i ? "; " : "") + failures[i];
  throw Error(what);
}

}  // namespace posenc::lab
