// One rank's view of a distributed lab run: the TCPStore every rank meets at, the Gloo process
// group that moves tensors, and a heartbeat that names a lost rank.
//
// Every rank beats every kBeat into the store ("posenc/alive/<rank>" = "<count> <step>") from a
// thread of its own, on its own store connection. When a collective fails (a peer closed its
// connection, or Gloo's timeout passed because a peer stopped answering) or a wait outlasts the
// timeout, the ranks whose beat stopped are named in the Error; when every beat goes on, the rank
// behind the others' step is named as stuck.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

#include "posenc_lab/distributed.h"

namespace posenc::lab {

// A TCPStore server on addr (port 0: a free one, written to *port) that lives as long as the
// returned handle: the launcher of local ranks holds it for the whole run.
std::shared_ptr<void> host_store(const std::string& addr, int* port, int timeout_seconds);

class World {
 public:
  // Joins the run of `launch` (resolved, world size > 1): connects to the store at
  // master_addr:master_port (rank 0 hosts it unless store_hosted) and meets every rank. An
  // unreachable master or a missing rank is an Error naming the address within the timeout.
  // plan (a JSON object: the command, its models and their settings, --distribute, the world
  // size) must be the same on every rank: before the ranks meet, each compares its own with rank
  // 0's and rank 0 compares every rank's, so every rank stops with an Error naming the setting
  // that differs (its path in the plan) and both values.
  World(const LaunchConfig& launch, const std::string& plan);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  int rank() const;
  int size() const;

  // Sums a contiguous float tensor over the ranks, in place; every rank gets the same bits.
  void sum(torch::Tensor& flat, const std::string& what);
  // Seconds this rank has spent in sum() so far (waiting for slower ranks included).
  double sum_seconds() const;
  // rank 0's bytes, on every rank (the others pass anything).
  std::string broadcast(const std::string& bytes, const std::string& what);
  // An Error on every rank when value is not the same on all of them (what names it).
  void check_same(std::uint64_t value, const std::string& what);

  // The store, for small messages between ranks. wait_for blocks until key is set, and throws
  // the lost-rank Error when rank `from` (-1: any rank) stops beating for the timeout.
  void set(const std::string& key, const std::string& value);
  std::string wait_for(const std::string& key, int from, const std::string& what);
  long add(const std::string& key, long delta);
  // The step this rank is at, published with its heartbeat.
  void note_step(long step);

  // Throws an Error that names the lost or stuck ranks (after sampling their heartbeats).
  [[noreturn]] void fail(const std::string& what, const std::string& cause);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// Rank 0's number on every rank (with world; else the number itself): for the decisions that set
// which collectives follow, which must be rank 0's (whose files they read) on every rank.
long rank0s_number(World* world, long value, const std::string& what);

}  // namespace posenc::lab
