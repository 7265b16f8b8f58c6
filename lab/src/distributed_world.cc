#include "distributed_world.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "distributed_plan.h"
#include "posenc/error.h"

namespace posenc::lab {
namespace {

using namespace std::chrono_literals;
constexpr auto kBeat = 250ms;
const std::string kAlive = "posenc/alive/";

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

c10::intrusive_ptr<c10d::TCPStore> connect_store(const LaunchConfig& l, bool server) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<std::uint16_t>(l.master_port);
  o.isServer = server;
  o.waitWorkers = false;  // the process group's rendezvous is where the ranks meet
  o.timeout = std::chrono::seconds(l.timeout_seconds);
  try {
    return c10::make_intrusive<c10d::TCPStore>(l.master_addr, o);
  } catch (const std::exception& e) {
    throw Error(std::string(server ? "rank 0 cannot host the store on " : "cannot reach the master at ") + l.master_addr + ":" +
                std::to_string(l.master_port) + " within " + std::to_string(l.timeout_seconds) +
                " s (--master-addr/--master-port or MASTER_ADDR/MASTER_PORT: where rank 0 runs): " + first_line(e.what()));
  }
}

}  // namespace

std::shared_ptr<void> host_store(const std::string& addr, int* port, int timeout_seconds) {
  c10d::TCPStoreOptions o;
  o.port = 0;
  o.isServer = true;
  o.waitWorkers = false;
  o.timeout = std::chrono::seconds(timeout_seconds);
  auto store = std::make_shared<c10d::TCPStore>(addr, o);
  *port = store->getPort();
  return store;
}

namespace {

const std::string kPlan = "posenc/plan/";

// This process's link to the run's store: the store itself (rank 0 hosts it unless the launcher
// of --nproc does), and the heartbeat thread on a connection of its own. The runs of one command
// share it while a RunSeries lives (a leaderboard's many runs: rank 0's store stays up between
// them, and every rank beats while it is between runs too).
struct Connection {
  LaunchConfig launch;
  c10::intrusive_ptr<c10d::TCPStore> store, beat_store;
  std::atomic<long> step{0};
  std::atomic<bool> stop{false};
  std::thread beat;

  explicit Connection(const LaunchConfig& l) : launch(l) {
    store = connect_store(l, l.rank == 0 && !l.store_hosted);
    beat_store = connect_store(l, false);
    beat = std::thread([this] {
      const std::string key = kAlive + std::to_string(launch.rank);
      for (long count = 0; !stop; ++count) {
        const std::string v = std::to_string(count) + " " + std::to_string(step.load());
        try {
          beat_store->set(key, std::vector<std::uint8_t>(v.begin(), v.end()));
        } catch (const std::exception&) {
          // Beat on: one failed write (a loaded host) must not silence this rank for a whole
          // board; a store that is gone is reported by the training thread's next exchange.
        }
        std::this_thread::sleep_for(kBeat);
      }
    });
  }
  ~Connection() {
    stop = true;
    beat.join();
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool serves(const LaunchConfig& l) const {
    return l.rank == launch.rank && l.world_size == launch.world_size && l.master_addr == launch.master_addr &&
           l.master_port == launch.master_port && l.store_hosted == launch.store_hosted;
  }

  // (beat count, step) of every rank; count -1: no beat yet. Throws when the store is gone.
  std::vector<std::pair<long, long>> beats() {
    std::vector<std::pair<long, long>> out;
    for (int r = 0; r < launch.world_size; ++r) {
      const std::string key = kAlive + std::to_string(r);
      if (!store->check({key})) {
        out.push_back({-1, 0});
        continue;
      }
      const auto v = store->get(key);
      long count = -1, at = 0;
      std::sscanf(std::string(v.begin(), v.end()).c_str(), "%ld %ld", &count, &at);
      out.push_back({count, at});
    }
    return out;
  }
};

// The runs this process has joined (every rank of a command joins the same runs in the same
// order, so the count names one run alike on all of them), and the connection a RunSeries keeps.
std::mutex g_mutex;
long g_runs = 0;
int g_series = 0;
std::shared_ptr<Connection> g_kept;

}  // namespace

RunSeries::RunSeries(const LaunchConfig& launch) {
  const LaunchConfig l = resolve_launch(launch);
  std::shared_ptr<Connection> link;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    ++g_series;
    if (world_size_of(l) <= 1 || (g_kept && g_kept->serves(l))) return;
  }
  try {
    link = std::make_shared<Connection>(l);
  } catch (...) {
    std::lock_guard<std::mutex> lock(g_mutex);
    --g_series;
    throw;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  g_kept = link;
}

RunSeries::~RunSeries() {
  std::shared_ptr<Connection> last;  // closed outside the lock
  std::lock_guard<std::mutex> lock(g_mutex);
  if (--g_series == 0) last.swap(g_kept);
}

struct World::State {
  LaunchConfig launch;
  std::shared_ptr<Connection> link;
  c10::intrusive_ptr<c10d::Store> store;  // this run's keys: "posenc/run/<n>/..." of link's store
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  double sum_seconds = 0;

  std::vector<std::pair<long, long>> beats() { return link->beats(); }
};

World::World(const LaunchConfig& l, const std::string& plan) : s_(std::make_unique<State>()) {
  s_->launch = l;
  long run = 0;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    run = g_runs++;
    if (g_kept && g_kept->serves(l)) s_->link = g_kept;
  }
  if (!s_->link) {
    s_->link = std::make_shared<Connection>(l);
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_series > 0) g_kept = s_->link;
  }
  s_->link->step = 0;  // this run's steps (fail() compares them)
  // Every key of this run, Gloo's rendezvous included, under its own prefix: a run that follows
  // another on the same store never reads the last one's plan, readiness or queue.
  s_->store = c10::make_intrusive<c10d::PrefixStore>("posenc/run/" + std::to_string(run), s_->link->store);
  // Posted before any comparison, so rank 0 always finds every rank's plan, even one that stops
  // on a difference; compared before Gloo meets, where a world size that differs would end in
  // Gloo's own assertion.
  set(kPlan + std::to_string(l.rank), plan);
  for (int r = l.rank == 0 ? 1 : 0; r < (l.rank == 0 ? l.world_size : 1); ++r) {
    const std::string theirs = wait_for(kPlan + std::to_string(r), r, "waiting for rank " + std::to_string(r) + "'s plan");
    const std::string difference = plan_difference(plan, l.rank, theirs, r);
    if (!difference.empty()) throw Error("rank " + std::to_string(l.rank) + " of " + std::to_string(l.world_size) + ": " + difference);
  }
  auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(l.timeout_seconds));
  try {
    // Each rank is reached at the address its hostname resolves to (127.0.0.1 when the master is
    // local: every rank is then on this host).
    options->devices.push_back(l.master_addr == "127.0.0.1" || l.master_addr == "localhost"
                                   ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                   : c10d::ProcessGroupGloo::createDefaultDevice());
    options->threads = 1;
    s_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(s_->store, l.rank, l.world_size, options);
  } catch (const std::exception& e) {
    throw Error("rank " + std::to_string(l.rank) + " of " + std::to_string(l.world_size) + " could not meet the other ranks at " +
                l.master_addr + ":" + std::to_string(l.master_port) + " within " + std::to_string(l.timeout_seconds) +
                " s (are all " + std::to_string(l.world_size) + " started, with the same --master-addr and --master-port?): " +
                first_line(e.what()));
  }
}

World::~World() = default;

long rank0s_number(World* world, long value, const std::string& what) {
  return world ? std::stol(world->broadcast(std::to_string(value), what)) : value;
}

int World::rank() const { return s_->launch.rank; }
int World::size() const { return s_->launch.world_size; }
void World::note_step(long step) { s_->link->step = step; }

void World::sum(torch::Tensor& flat, const std::string& what) {
  std::vector<at::Tensor> tensors{flat};
  const auto began = std::chrono::steady_clock::now();
  try {
    s_->group->allreduce(tensors)->wait();
  } catch (const std::exception& e) {
    fail(what, e.what());
  }
  s_->sum_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
}

double World::sum_seconds() const { return s_->sum_seconds; }

std::string World::broadcast(const std::string& bytes, const std::string& what) {
  try {
    std::vector<at::Tensor> size{torch::tensor({static_cast<std::int64_t>(bytes.size())}, torch::kInt64)};
    s_->group->broadcast(size)->wait();
    std::vector<at::Tensor> data{torch::empty({size[0].item<std::int64_t>()}, torch::kUInt8)};
    if (rank() == 0) std::memcpy(data[0].data_ptr(), bytes.data(), bytes.size());
    if (data[0].numel() > 0) s_->group->broadcast(data)->wait();
    return std::string(static_cast<const char*>(data[0].data_ptr()), static_cast<std::size_t>(data[0].numel()));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(what, e.what());
  }
}

void World::check_same(std::uint64_t value, const std::string& what) {
  // The 64 bits as two 32-bit halves, with their negations: one MAX gives the maximum and the
  // minimum of each half over the ranks.
  const std::int64_t hi = static_cast<std::int64_t>(value >> 32), lo = static_cast<std::int64_t>(value & 0xffffffffu);
  torch::Tensor t = torch::tensor({hi, lo, -hi, -lo}, torch::kInt64);
  std::vector<at::Tensor> tensors{t};
  try {
    c10d::AllreduceOptions o;
    o.reduceOp = c10d::ReduceOp::MAX;
    s_->group->allreduce(tensors, o)->wait();
  } catch (const std::exception& e) {
    fail(what, e.what());
  }
  auto a = t.accessor<std::int64_t, 1>();
  if (a[0] != -a[2] || a[1] != -a[3])
    throw Error(what + " differs between the " + std::to_string(size()) +
                " ranks (do all run the same command on the same corpus and build?)");
}

void World::set(const std::string& key, const std::string& value) {
  try {
    s_->store->set(key, std::vector<std::uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& e) {
    fail("sending " + key, e.what());
  }
}

long World::add(const std::string& key, long delta) {
  try {
    return static_cast<long>(s_->store->add(key, delta));
  } catch (const std::exception& e) {
    fail("updating " + key, e.what());
  }
}

std::string World::wait_for(const std::string& key, int from, const std::string& what) {
  const auto limit = std::chrono::seconds(s_->launch.timeout_seconds);
  try {
    std::vector<std::pair<long, long>> seen = s_->beats();
    std::vector<std::chrono::steady_clock::time_point> since(seen.size(), std::chrono::steady_clock::now());
    while (!s_->store->check({key})) {
      std::this_thread::sleep_for(20ms);
      const auto now = std::chrono::steady_clock::now();
      const auto beats = s_->beats();
      for (std::size_t r = 0; r < beats.size(); ++r) {
        if (beats[r].first != seen[r].first) since[r] = now;
        seen[r] = beats[r];
        if ((from < 0 || static_cast<int>(r) == from) && now - since[r] > limit)
          fail(what, "rank " + std::to_string(r) + " sent no heartbeat for " + std::to_string(s_->launch.timeout_seconds) + " s");
      }
    }
    const auto v = s_->store->get(key);
    return std::string(v.begin(), v.end());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(what, e.what());
  }
}

void World::fail(const std::string& what, const std::string& cause) {
  const std::string where = "rank " + std::to_string(rank()) + " of " + std::to_string(size()) + ", " + what + ": ";
  std::string lost;
  try {
    const auto before = s_->beats();
    std::this_thread::sleep_for(6 * kBeat);  // a live rank beats several times meanwhile
    const auto after = s_->beats();
    long ahead = 0;
    for (const auto& b : after) ahead = std::max(ahead, b.second);
    for (std::size_t r = 0; r < after.size(); ++r)
      if (static_cast<int>(r) != rank() && (after[r].first < 0 || after[r].first == before[r].first))
        lost += (lost.empty() ? "" : ", ") + std::to_string(r);
    if (!lost.empty())
      throw Error(where + "lost rank " + lost + " (its heartbeat stopped: the process died or hangs); " + first_line(cause));
    for (std::size_t r = 0; r < after.size(); ++r)
      if (after[r].second < ahead) lost += (lost.empty() ? "" : ", ") + std::to_string(r);
    if (!lost.empty())
      throw Error(where + "rank " + lost + " is alive but stuck behind step " + std::to_string(ahead) + "; " + first_line(cause));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // The store itself is unreachable: whoever hosts it is gone.
    throw Error(where + (s_->launch.store_hosted ? std::string("lost the launcher that hosts the store")
                                                   : std::string("lost rank 0 (it hosts the store at ") + s_->launch.master_addr +
                                                         ":" + std::to_string(s_->launch.master_port) + ")") +
                "; " + first_line(cause));
  }
  throw Error(where + first_line(cause));
}

}  // namespace posenc::lab
