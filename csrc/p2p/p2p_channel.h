// What carries point-to-point messages between ranks, under the engine (p2p_engine.h): shared
// memory mailboxes (shm_channel.h) or MPI (mpi_channel.h). The engine holds the ops, their
// deadlines and the threads; a channel only moves bytes and says why a peer will not come.
// Every call is made under the engine's lock, from one thread at a time.
#pragma once

#include <deque>
#include <memory>
#include <string>

#include "p2p/p2p_op.h"

namespace dpcore {

using P2pOps = std::deque<std::shared_ptr<P2pOp>>;

class P2pChannel {
 public:
  virtual ~P2pChannel() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Moves what it can of `ops` (pending, in posting order: sends to one peer leave in that
  // order, receives take messages in that order) and finishes those that are complete. Throws
  // CommError with the message both ranks raise where a send met the wrong receive. Returns
  // whether anything moved.
  virtual bool progress(P2pOps& ops) = 0;
  // Why `peer` (kAnySource: every peer) will never complete an op with this rank: it died, it
  // left, or a rank failed a point-to-point op (the reason verbatim). "" while none is known.
  // deep: also the costlier checks (pids), which the engine makes every 200 ms.
  virtual std::string trouble(int peer, bool deep) = 0;
  // This rank's point-to-point failed with `why`: tell the peers where the channel can, and let
  // go of `failed`, the ops that were pending (what MPI still holds of them stays held).
  virtual void abort(const std::string& why, const P2pOps& failed) = 0;
  // This rank posts no more ops: peers waiting for one fail rather than wait.
  virtual void leave() = 0;
};

}  // namespace dpcore
