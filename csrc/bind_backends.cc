// dpcore._C's backends: one class per transport over the Backend base (core/backend.h), the Job
// of an async call, and Communicator.alloc's SharedBuffer. Pointers, counts and enum codes in;
// dpcore/comm/ has checked them. Every blocking call releases the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/backend.h"
#include "core/collectives.h"
#include "cpu/shm_segment.h"
#include "cpu/shm_transport.h"
#include "mpi/hierarchical.h"
#include "mpi/mpi_transport.h"

namespace py = pybind11;

namespace dpcore {
namespace {

using ShmBackend = Queued<Collectives<ShmTransport>>;
using MpiBackend = Queued<Collectives<MpiTransport>>;
using HierarchicalBackend = Queued<Hierarchical>;

// out: None where the rank has no output (reduce off the root): nullptr. table: the address of
// the call's uint64 table in the caller's memory, or 0: all_to_all's n x n splits; scatter's
// root with x as a list, its pieces' addresses (in is the first), each piece as long as the
// root's own out (dpcore/comm/pieces.py checked it). One argument for both: each argument
// costs every call of every collective (a few hundred instructions in pybind11's dispatch).
Task makeTask(int coll, int dtype, int op, int root, int algo, const py::array& in,
              const std::optional<py::array>& out, size_t count, size_t total, uintptr_t table) {
  // writability was checked in Python
  Task t = taskOf(coll, dtype, op, root, algo, in.data(),
                  out ? const_cast<void*>(out->data()) : nullptr, count, total);
  if (t.coll != Coll::kScatter) {
    t.splits = reinterpret_cast<const uint64_t*>(table);
  } else if (table) {
    t.pieces = Pieces{reinterpret_cast<const void* const*>(table), total};
  }
  return t;
}

// The arguments of run and submit: table is all_to_all's and scatter's alone.
#define DP_CALL_ARGS                                                                        \
  py::arg("coll"), py::arg("dtype"), py::arg("op"), py::arg("root"), py::arg("algo"),       \
      py::arg("in_array"), py::arg("out_array"), py::arg("count"), py::arg("total"),        \
      py::arg("table") = 0

// (handle bytes, comm, MPI_BYTE, rank, size, names, pids): dpcore/setup/mpi_endpoint.py
MpiEndpoint endpoint(py::tuple t) {
  return MpiEndpoint{MpiApi::load(t[0].cast<int>()), t[1].cast<uint64_t>(), t[2].cast<uint64_t>(),
                     t[3].cast<int>(), t[4].cast<int>(), t[5].cast<std::vector<int>>(),
                     t[6].cast<std::vector<int64_t>>()};
}

// One Communicator.alloc allocation as one rank holds it: its own buffer, a segment it
// creates, and its mappings of every peer's. Once every rank has mapped every segment, share()
// enters them in the communicator's table, and destruction takes them out again before the
// mappings go (cpu/shared_buffers.h).
class SharedBuffer {
 public:
  SharedBuffer(int ranks, int rank, size_t bytes) : segments_(ranks), rank_(rank), bytes_(bytes) {}
  ~SharedBuffer() {
    if (table_) table_->remove(id_);
  }
  void create(const std::string& name) {
    segments_[rank_] = std::make_unique<ShmSegment>(name, bytes_, true);
  }
  void open(int r, const std::string& name) {
    segments_[r] = std::make_unique<ShmSegment>(name, bytes_, false);
  }
  void unlink() {
    if (segments_[rank_]) segments_[rank_]->unlink();
  }
  char* data() const { return segments_[rank_]->data(); }
  size_t size() const { return bytes_; }
  void share(ShmBackend& backend, uint32_t id, std::vector<uint64_t> bases) {
    std::vector<char*> mapped;
    for (auto& s : segments_) mapped.push_back(s->data());
    table_ = backend.engine().transport().sharedBuffers();
    id_ = id;
    table_->add(id, rank_, bytes_, std::move(mapped), std::move(bases));
  }

 private:
  std::vector<std::unique_ptr<ShmSegment>> segments_;  // per rank
  int rank_;
  size_t bytes_;
  std::shared_ptr<SharedBuffers> table_;
  uint32_t id_ = 0;
};

}  // namespace

// The endpoint tuple as bind_p2p.cc takes it too (MPI point-to-point).
MpiEndpoint mpiEndpointOf(py::tuple t) { return endpoint(t); }

void bindBackends(py::module_& m) {
  m.attr("TRACE_BATCH") = kTraceBatch;  // the most events a streaming trace holds in memory
  py::class_<Job, std::shared_ptr<Job>>(m, "Job")
      .def("done", &Job::done)
      .def("failed", &Job::failed)
      .def("wait", [](Job& j, double timeout) {
            bool finished;
            {
              py::gil_scoped_release release;
              finished = j.waitFor(timeout);
            }
            if (finished) j.rethrow();
            return finished;
          }, py::arg("timeout") = -1.0);

  // The calls every backend takes (dpcore/comm/backend.py documents them). in and out are NumPy
  // arrays; the caller keeps them alive until the collective is done.
  py::class_<Backend, std::shared_ptr<Backend>>(m, "Backend")
      .def("run", [](Backend& b, int coll, int dtype, int op, int root, int algo, py::array in,
                     std::optional<py::array> out, size_t count, size_t total,
                     uintptr_t table) {
            Task t = makeTask(coll, dtype, op, root, algo, in, out, count, total, table);
            py::gil_scoped_release release;
            b.run(t);
          }, DP_CALL_ARGS)
      .def("submit", [](Backend& b, int coll, int dtype, int op, int root, int algo,
                        py::array in, std::optional<py::array> out, size_t count, size_t total,
                        uintptr_t table) {
            return b.submit(makeTask(coll, dtype, op, root, algo, in, out, count, total,
                                     table));
          }, DP_CALL_ARGS)
      .def("exchange_counts", [](Backend& b, int coll, int root, int dtype, size_t mine) {
            return b.exchangeCounts(static_cast<Coll>(coll), root, static_cast<DType>(dtype),
                                    mine);
          }, py::call_guard<py::gil_scoped_release>())
      .def("drain", &Backend::drain, py::call_guard<py::gil_scoped_release>())
      .def("leave", &Backend::leave, py::arg("why"), py::call_guard<py::gil_scoped_release>())
      .def("pass_on", &Backend::passOn, py::arg("news"),
           py::call_guard<py::gil_scoped_release>())
      .def("set_timeout", &Backend::setTimeout)
      .def("enable_trace", [](Backend& b, bool on) { b.tracer().keep(on); })
      .def("log_choices", [](Backend& b, const std::string& prefix) {
            b.tracer().logChoices(prefix);
          }, py::arg("prefix"))
      .def("trace_to", [](Backend& b, const std::string& path, int lane) {
            b.tracer().streamTo(path, lane);
          }, py::arg("path"), py::arg("lane"))
      .def("flush_trace", [](Backend& b) {
            b.drain();
            b.tracer().flush();
          }, py::call_guard<py::gil_scoped_release>())
      .def("trace_peak", [](Backend& b) { return b.tracer().peakHeld(); })
      // The events recorded so far, as (name, start_us, duration_us, seq, step, bytes, algo,
      // dtype, op), the last three codes or -1; clears.
      .def("take_trace", [](Backend& b) {
            py::gil_scoped_release release;
            b.drain();
            std::vector<std::tuple<std::string, int64_t, int64_t, uint64_t, int, uint64_t, int,
                                   int, int>> out;
            for (const TraceEvent& e : b.tracer().events) {
              out.emplace_back(e.name, e.startUs, e.durationUs, e.seq, e.step, e.bytes, e.algo,
                               e.dtype, e.op);
            }
            b.tracer().events.clear();
            return out;
          })
      .def_property_readonly("sequence", &Backend::sequence)
      // Before the communicator's first call on CUDA arrays sets up its device side: where this
      // (its host backend) is shared memory, meet the peers here, so that one that made the
      // call on host arrays is a CommError on every rank at once (ShmTransport::meetElsewhere).
      .def("meet_other_side", [](Backend& b, int coll) {
            auto* shm = dynamic_cast<ShmBackend*>(&b);
            if (shm == nullptr) return;
            shm->drain();
            shm->engine().meetElsewhere(static_cast<Coll>(coll), shm->order()->upcoming());
          }, py::arg("coll"), py::call_guard<py::gil_scoped_release>())
      // How many collectives each algorithm code ran (auto resolved to what it ran), once the
      // queued ones are done.
      .def("algo_calls", &Backend::algoCalls, py::call_guard<py::gil_scoped_release>());

  py::class_<ShmBackend, Backend, std::shared_ptr<ShmBackend>>(m, "ShmBackend")
      .def(py::init([](const std::string& name, bool create, int rank, int size, int fifoSlots,
                       size_t slotBytes, size_t oneShotBytes, bool tune, double timeout,
                       double spinUs) {
             return std::make_shared<ShmBackend>(
                 true, tune, timeout, name, create, rank,
                 ShmConfig{size, fifoSlots, slotBytes, oneShotBytes}, spinUs);
           }),
           py::arg("name"), py::arg("create"), py::arg("rank"), py::arg("size"),
           py::arg("fifo_slots"), py::arg("slot_bytes"), py::arg("one_shot_bytes"),
           py::arg("tune"), py::arg("timeout"), py::arg("spin_us"),
           py::call_guard<py::gil_scoped_release>())
      .def("unlink", [](ShmBackend& b) { b.engine().transport().unlinkSegment(); })
      .def("can_read_peers", [](ShmBackend& b) { return b.engine().transport().canReadPeers(); },
           py::call_guard<py::gil_scoped_release>())
      .def("set_peer_reads", [](ShmBackend& b, bool ok) {
            b.engine().transport().setPeerReads(ok);
          }, py::arg("ok"));

  // endpoint: (handle bytes, comm handle, MPI_BYTE handle, rank, size, rank names, pids), as
  // dpcore/setup/mpi_endpoint.py reads them from mpi4py. threaded: MPI_THREAD_MULTIPLE. slots and
  // slot_bytes: the ring's, as on shared memory.
  py::class_<MpiBackend, Backend, std::shared_ptr<MpiBackend>>(m, "MpiBackend")
      .def(py::init([](py::tuple world, size_t slots, size_t slotBytes, double timeout,
                       bool threaded) {
             return std::make_shared<MpiBackend>(threaded, true, timeout, endpoint(world), slots,
                                                 slotBytes);
           }),
           py::arg("endpoint"), py::arg("slots"), py::arg("slot_bytes"), py::arg("timeout"),
           py::arg("threaded"));

  py::class_<HierarchicalBackend, Backend, std::shared_ptr<HierarchicalBackend>>(
      m, "HierarchicalBackend")
      .def(py::init([](const std::string& name, bool create, int localRank, int localSize,
                       int fifoSlots, size_t slotBytes, size_t oneShotBytes, double timeout,
                       py::tuple world, py::object cross, size_t mpiSlots, size_t mpiSlotBytes,
                       bool threaded, std::vector<int> nodeRanks, double spinUs) {
             MpiEndpoint all = endpoint(world);
             std::unique_ptr<MpiEndpoint> across;
             if (!cross.is_none()) {
               across = std::make_unique<MpiEndpoint>(endpoint(cross.cast<py::tuple>()));
             }
             py::gil_scoped_release release;
             return std::make_shared<HierarchicalBackend>(
                 threaded, timeout, name, create, localRank,
                 ShmConfig{localSize, fifoSlots, slotBytes, oneShotBytes, std::move(nodeRanks)},
                 spinUs, std::move(all),
                 std::move(across), mpiSlots, mpiSlotBytes);
           }),
           py::arg("name"), py::arg("create"), py::arg("local_rank"), py::arg("local_size"),
           py::arg("fifo_slots"), py::arg("slot_bytes"), py::arg("one_shot_bytes"),
           py::arg("timeout"), py::arg("endpoint"), py::arg("cross"), py::arg("mpi_slots"),
           py::arg("mpi_slot_bytes"), py::arg("threaded"), py::arg("node_ranks"),
           py::arg("spin_us"))
      .def("unlink", [](HierarchicalBackend& b) { b.engine().node().unlinkSegment(); })
      .def_property_readonly("hierarchical",
                             [](HierarchicalBackend& b) { return b.engine().hierarchical(); })
      .def_property_readonly("node_sequence",
                             [](HierarchicalBackend& b) { return b.engine().nodeSequence(); });

  py::class_<SharedBuffer>(m, "SharedBuffer", py::buffer_protocol())
      .def(py::init<int, int, size_t>(), py::arg("ranks"), py::arg("rank"), py::arg("bytes"))
      .def("create", &SharedBuffer::create, py::arg("name"))
      .def("open", &SharedBuffer::open, py::arg("rank"), py::arg("name"))
      .def("unlink", &SharedBuffer::unlink)
      .def_property_readonly("address", [](SharedBuffer& b) {
            return reinterpret_cast<uint64_t>(b.data());
          })
      .def("share", &SharedBuffer::share, py::arg("backend"), py::arg("id"), py::arg("bases"))
      .def_buffer([](SharedBuffer& b) {
            return py::buffer_info(b.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                                   {b.size()}, {1});
          });
}

}  // namespace dpcore
