// dpcore._C: the raw API. Pointers, counts and enums in; no argument checking beyond what keeps
// memory safe (dpcore/comm.py checks and speaks NumPy). Every blocking call releases the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algo/ring.h"
#include "algo/trace_prims.h"
#include "cpu/reduce.h"
#include "cpu/shm_comm.h"
#include "cpu/stream_copy.h"
#include "cpu/worker.h"
#include "dpcore/error.h"

#ifdef DPCORE_WITH_CUDA
#include "cuda/cuda_api.h"
#endif

namespace py = pybind11;
using namespace dpcore;

namespace {

// A communicator and the worker that serialises its collectives. The worker is declared last so
// it is destroyed (joined) first, while the ShmComm it uses still exists.
class Comm {
 public:
  Comm(const std::string& name, bool create, int rank, int size, int fifoSlots, size_t slotBytes,
       size_t oneShotBytes, bool tune, double timeout)
      : shm_(name, create, rank, ShmConfig{size, fifoSlots, slotBytes, oneShotBytes, tune},
             timeout) {}

  void run(const Task& task) {
    worker_.runNow([&] { shm_.run(task); });
  }
  std::shared_ptr<Job> submit(const Task& task) {
    return worker_.submit([this, task] { shm_.run(task); });
  }
  std::vector<size_t> exchangeCounts(DType dtype, size_t mine) {
    std::vector<size_t> counts;
    worker_.runNow([&] { counts = shm_.exchangeCounts(dtype, mine); });
    return counts;
  }
  void drain() { worker_.drain(); }
  ShmComm& shm() { return shm_; }

 private:
  ShmComm shm_;
  Worker worker_;
};

// One Communicator.alloc allocation as one rank holds it: its own buffer, a segment it
// creates, and its mappings of every peer's. Once every rank has mapped every segment, share()
// enters them in a communicator's table, and destruction takes them out again before the
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
  void share(Comm& comm, uint32_t id, std::vector<uint64_t> bases) {
    std::vector<char*> mapped;
    for (auto& s : segments_) mapped.push_back(s->data());
    table_ = comm.shm().sharedBuffers();
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

Task makeTask(int coll, int dtype, int op, int root, int algo, const py::array& in,
              const py::array& out, size_t count, size_t total) {
  Task t;
  t.coll = static_cast<Coll>(coll);
  t.dtype = static_cast<DType>(dtype);
  t.op = static_cast<ReduceOp>(op);
  t.root = root;
  t.algo = static_cast<Algo>(algo);
  t.in = in.data();
  t.out = const_cast<void*>(out.data());  // writability was checked in Python
  t.count = count;
  t.total = total;
  return t;
}

// The verbs one rank runs for a ring collective over `count` one-byte elements.
std::vector<std::tuple<std::string, size_t, size_t>> ringTrace(const std::string& coll,
                                                               size_t count, int rank, int n,
                                                               size_t segmentCount, int root,
                                                               std::vector<size_t> counts) {
  TracePrims p;
  char* base = nullptr;
  if (coll == "all_reduce") ringAllReduce(p, base, base, count, 1, rank, n, segmentCount);
  else if (coll == "reduce_scatter")
    ringReduceScatter(p, base, base, count, 1, rank, n, segmentCount);
  else if (coll == "all_gather") ringAllGather(p, base, base, counts, 1, rank, n, segmentCount);
  else if (coll == "broadcast") ringBroadcast(p, base, count, 1, rank, n, root, segmentCount);
  else throw std::invalid_argument("unknown collective " + coll);
  std::vector<std::tuple<std::string, size_t, size_t>> out;
  for (const VerbRecord& e : p.events) out.emplace_back(e.verb, e.start, e.count);
  return out;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "dpcore's compiled core: shared-memory transport, ring algorithms, reduce kernels";
  py::register_exception<CommError>(m, "CommError", PyExc_RuntimeError);

  py::class_<Job, std::shared_ptr<Job>>(m, "Job")
      .def("done", &Job::done)
      .def("wait", [](Job& j, double timeout) {
            bool finished;
            {
              py::gil_scoped_release release;
              finished = j.waitFor(timeout);
            }
            if (finished) j.rethrow();
            return finished;
          }, py::arg("timeout") = -1.0);

  py::class_<Comm>(m, "ShmComm")
      .def(py::init<const std::string&, bool, int, int, int, size_t, size_t, bool, double>(),
           py::arg("name"), py::arg("create"), py::arg("rank"), py::arg("size"),
           py::arg("fifo_slots"), py::arg("slot_bytes"), py::arg("one_shot_bytes"),
           py::arg("tune"), py::arg("timeout"), py::call_guard<py::gil_scoped_release>())
      .def("unlink", [](Comm& c) { c.shm().unlinkSegment(); })
      .def("can_read_peers", [](Comm& c) { return c.shm().canReadPeers(); },
           py::call_guard<py::gil_scoped_release>())
      // in and out are NumPy arrays (the caller keeps them alive until the collective is done).
      .def("run", [](Comm& c, int coll, int dtype, int op, int root, int algo, py::array in,
                     py::array out, size_t count, size_t total) {
            Task t = makeTask(coll, dtype, op, root, algo, in, out, count, total);
            py::gil_scoped_release release;
            c.run(t);
          })
      .def("submit", [](Comm& c, int coll, int dtype, int op, int root, int algo, py::array in,
                        py::array out, size_t count, size_t total) {
            return c.submit(makeTask(coll, dtype, op, root, algo, in, out, count, total));
          })
      .def("exchange_counts", [](Comm& c, int dtype, size_t mine) {
            return c.exchangeCounts(static_cast<DType>(dtype), mine);
          }, py::call_guard<py::gil_scoped_release>())
      .def("drain", &Comm::drain, py::call_guard<py::gil_scoped_release>())
      .def("set_timeout", [](Comm& c, double s) { c.shm().setTimeout(s); })
      .def("enable_trace", [](Comm& c, bool on) { c.shm().tracer_.enabled = on; })
      // The events recorded so far, as (name, start_us, duration_us, seq, step, bytes); clears.
      .def("take_trace", [](Comm& c) {
            py::gil_scoped_release release;
            c.drain();
            std::vector<std::tuple<std::string, int64_t, int64_t, uint64_t, int, uint64_t>> out;
            for (const TraceEvent& e : c.shm().tracer_.events) {
              out.emplace_back(e.name, e.startUs, e.durationUs, e.seq, e.step, e.bytes);
            }
            c.shm().tracer_.events.clear();
            return out;
          })
      .def_property_readonly("sequence", [](Comm& c) { return c.shm().sequence(); })
      // How many collectives each algorithm code ran (auto resolved to ring or direct), once
      // the queued ones are done.
      .def("algo_calls", [](Comm& c) {
            c.drain();
            const uint64_t* calls = c.shm().algoCalls();
            return std::vector<uint64_t>(calls, calls + ShmComm::kRunnableAlgos);
          }, py::call_guard<py::gil_scoped_release>());

  py::class_<SharedBuffer>(m, "SharedBuffer", py::buffer_protocol())
      .def(py::init<int, int, size_t>(), py::arg("ranks"), py::arg("rank"), py::arg("bytes"))
      .def("create", &SharedBuffer::create, py::arg("name"))
      .def("open", &SharedBuffer::open, py::arg("rank"), py::arg("name"))
      .def("unlink", &SharedBuffer::unlink)
      .def_property_readonly("address", [](SharedBuffer& b) {
            return reinterpret_cast<uint64_t>(b.data());
          })
      .def("share", &SharedBuffer::share, py::arg("comm"), py::arg("id"), py::arg("bases"))
      .def_buffer([](SharedBuffer& b) {
            return py::buffer_info(b.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                                   {b.size()}, {1});
          });

  m.def("reduce", [](int dtype, int op, uintptr_t a, uintptr_t b, uintptr_t out, size_t count,
                     int divisor) {
        reduce2(static_cast<DType>(dtype), static_cast<ReduceOp>(op),
                reinterpret_cast<const void*>(a), reinterpret_cast<const void*>(b),
                reinterpret_cast<void*>(out), count, divisor);
      }, "out = a op b elementwise (divisor > 0 divides: the last step of avg)",
      py::call_guard<py::gil_scoped_release>());

  m.def("stream_copy", [](py::array dst, const py::array& src) {
        if (dst.nbytes() != src.nbytes()) throw std::invalid_argument("sizes differ");
        if (!(dst.flags() & src.flags() & py::array::c_style)) {
          throw std::invalid_argument("arrays must be C-contiguous");
        }
        void* to = dst.mutable_data();  // raises if dst is read-only
        py::gil_scoped_release release;
        streamCopy(to, src.data(), src.nbytes());
      }, "dst[:] = src, C-contiguous arrays, with streaming stores (cpu/stream_copy.h)");
  m.def("stream_min_bytes", &streamMinBytes,
        "direct writes outputs of at least this many bytes with streaming stores where it can");

  // The tuner behind algo auto (cpu/tuner.h), on its own, for tests of its policy.
  m.attr("TUNER_SETTLE_CALLS") = Tuner::kSettleCalls;
  m.attr("FIXED_DIRECT_MIN") = Tuner::kFixedDirectMin;
  py::class_<Tuner>(m, "Tuner")
      .def(py::init<>())
      .def("pick_direct", [](Tuner& t, int coll, size_t bytes, bool shared, bool inPlace) {
            return t.pickDirect(static_cast<Coll>(coll), bytes, BufferKind{shared, inPlace});
          }, py::arg("coll"), py::arg("bytes"), py::arg("shared") = false,
          py::arg("in_place") = true)
      .def("record", [](Tuner& t, int coll, size_t bytes, bool direct, double seconds,
                        bool shared, bool inPlace) {
            t.record(static_cast<Coll>(coll), bytes, BufferKind{shared, inPlace}, direct,
                     seconds);
          }, py::arg("coll"), py::arg("bytes"), py::arg("direct"), py::arg("seconds"),
          py::arg("shared") = false, py::arg("in_place") = true);

  m.def("ring_trace", &ringTrace, py::arg("coll"), py::arg("count"), py::arg("rank"),
        py::arg("size"), py::arg("segment_count"), py::arg("root") = 0,
        py::arg("counts") = std::vector<size_t>{});

  m.def("build_info", [] {
    py::dict info;
#ifdef DPCORE_WITH_CUDA
    info["cuda"] = true;
    info["cuda_archs"] = std::string(DPCORE_CUDA_ARCHS);
    info["cuda_available"] = cudaAvailable();
#else
    info["cuda"] = false;
    info["cuda_archs"] = std::string();
    info["cuda_available"] = false;
#endif
    return info;
  });

#ifdef DPCORE_WITH_CUDA
  m.def("cuda_reduce", [](int dtype, int op, uintptr_t a, uintptr_t b, uintptr_t out,
                          size_t count, int divisor, uintptr_t stream) {
        cudaReduce2(static_cast<DType>(dtype), static_cast<ReduceOp>(op),
                    reinterpret_cast<const void*>(a), reinterpret_cast<const void*>(b),
                    reinterpret_cast<void*>(out), count, divisor, reinterpret_cast<void*>(stream));
      }, "device out = a op b, queued on `stream` (0: the default stream)",
      py::call_guard<py::gil_scoped_release>());
#endif
}
