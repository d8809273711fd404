// The MPI transport (mpi_transport.h): headers and one-shot payloads sent to every peer, and
// the ring's prims with their slots.
#include "mpi/mpi_transport.h"


#include "algo/one_shot.h"
#include "algo/trace_prims.h"
#include "core/contracts.h"
#include "dpcore/limits.h"

namespace dpcore {

static_assert(contract::isTransport<MpiTransport>());  // core/contracts.h names what it lacks

namespace {
// MpiPrims::kTag carries the ring's segments, MpiMessages::kTag gather, scatter and all_to_all's
constexpr int kHeaderTag = 1, kPayloadTag = 3;
}  // namespace

MpiTransport::MpiTransport(MpiEndpoint endpoint, size_t slots, size_t segmentBytes)
    : link_(std::move(endpoint)),
      slots_{checkRingSlots(static_cast<long long>(slots), segmentBytes), segmentBytes,
             new char[2 * slots * segmentBytes]},
      headers_(std::make_unique<std::vector<CollHeader>>()),
      staging_(std::make_unique<std::vector<char>>()) {}

MpiTransport::~MpiTransport() {
  if (failed_) {  // left to MPI on purpose (abort)
    (void)headers_.release();
    (void)staging_.release();
  } else {
    delete[] slots_.memory;
  }
}

// Point-to-point rather than an MPI allgather, so that a timeout can name the ranks that
// never arrived; also a barrier.
std::vector<CollHeader> MpiTransport::exchange(const Task&, const CollHeader& mine) {
  std::vector<CollHeader>& headers = *headers_;
  headers.assign(size(), mine);
  std::vector<MpiLink::Pending> pending;
  for (int peer = 0; peer < size(); ++peer) {
    if (peer == rank()) continue;
    pending.push_back(link_.irecv(&headers[peer], sizeof(CollHeader), peer, kHeaderTag));
    pending.push_back(link_.isend(&headers[rank()], sizeof(CollHeader), peer, kHeaderTag));
  }
  link_.waitAll(pending.data(), pending.size());
  return headers;
}

MpiPrims MpiTransport::prims(const RingCall& ring, const std::vector<CollHeader>&) {
  TracePrims schedule;  // counts the segments this rank will receive
  ringCollective(schedule, ring);
  const Task& task = ring.task;
  return MpiPrims(link_, slots_, task.dtype, task.op,
                  avgDivisor(task, ring.n), schedule.receives(),
                  StepSpans(call_->tracer, call_->seq, ringVerbsPerRound(task.coll, ring.n)));
}

// Every rank that publishes a payload (one_shot.h) sends it whole to every peer that reads
// payloads. They go out from, and come in to, staging memory, so MPI never holds the user's
// buffers.
MpiPayloads MpiTransport::payloads(const Task& task, const std::vector<CollHeader>& headers) {
  const size_t elem = dtypeSize(task.dtype);
  std::vector<size_t> offsets(size() + 1, 0);
  for (int r = 0; r < size(); ++r) {
    const size_t bytes = publishesPayload(task, r) ? headers[r].count * elem : 0;
    offsets[r + 1] = offsets[r] + bytes;
  }
  std::vector<char>& staging = *staging_;
  staging.resize(offsets[size()]);
  char* mine = staging.data() + offsets[rank()];
  const size_t myBytes = offsets[rank() + 1] - offsets[rank()];
  copyInput(task, 0, myBytes, mine);
  std::vector<MpiLink::Pending> pending;
  for (int peer = 0; peer < size(); ++peer) {
    if (peer == rank()) continue;
    if (offsets[peer + 1] > offsets[peer] && readsPayloads(task, rank())) {
      pending.push_back(link_.irecv(staging.data() + offsets[peer],
                                    offsets[peer + 1] - offsets[peer], peer, kPayloadTag));
    }
    if (myBytes && readsPayloads(task, peer)) {
      pending.push_back(link_.isend(mine, myBytes, peer, kPayloadTag));
    }
  }
  link_.waitAll(pending.data(), pending.size());
  return MpiPayloads(staging.data(), std::move(offsets));
}

}  // namespace dpcore
