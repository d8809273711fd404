// dpcore._C: the raw API. Pointers, counts and enum codes in; no argument checking beyond what
// keeps memory safe (dpcore/comm/ checks and speaks NumPy). The backends are bound in
// bind_backends.cc; here the names of the shared vocabulary, the loops and the ring's schedule.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "algo/ring.h"
#include "algo/trace_prims.h"
#include "dpcore/limits.h"
#include "core/process.h"
#include "core/tuner.h"
#include "host/reduce.h"
#include "host/stream_copy.h"
#include "dpcore/coll_table.h"
#include "dpcore/error.h"
#include "plain_arrays.h"

#ifdef DPCORE_WITH_CUDA
#include "cuda/cuda_api.h"
#endif

namespace py = pybind11;

namespace dpcore {
void bindBackends(py::module_& m);
void bindDevice(py::module_& m);
void bindP2p(py::module_& m);
void bindPlain(py::module_& m);
}  // namespace dpcore

using namespace dpcore;

namespace {

// {name: code} of an enum, from its name function: Python's only source for the codes.
template <class E, class Name>
py::dict names(int count, Name name) {
  py::dict d;
  for (int i = 0; i < count; ++i) d[name(static_cast<E>(i))] = i;
  return d;
}

// kCollTable's rows, for dpcore/collectives.py: an Amount as (whole, peers, chunks), an
// algorithm's cost as (bytes, reduced, steps, chain).
py::list collectiveTable() {
  auto amount = [](Amount a) { return py::make_tuple(a.whole, a.peers, a.chunks); };
  auto cost = [&](const AlgoCost& c) {
    return py::make_tuple(amount(c.bytes), amount(c.reduced), amount(c.steps), c.chain);
  };
  py::list rows;
  for (const CollInfo& c : kCollTable) {
    py::dict algos;  // those that run it
    for (auto [algo, costs] : {std::pair{Algo::kRing, c.ring}, {Algo::kOneShot, c.oneShot},
                               {Algo::kDirect, c.direct}}) {
      if (costs.runs) algos[algoName(algo)] = cost(costs);
    }
    rows.append(py::dict(py::arg("name") = c.name, py::arg("code") = static_cast<int>(c.coll),
                         py::arg("reduces") = c.reduces, py::arg("rooted") = c.rooted,
                         py::arg("output") = outputName(c.output), py::arg("algorithms") = algos,
                         py::arg("bus_factor") = amount(c.busFactor)));
  }
  return rows;
}

using VerbList = std::vector<std::tuple<std::string, size_t, size_t>>;

// The verbs one rank runs for a ring collective over `count` one-byte elements, as run by
// `trace` (the CPU's TracePrims, or the GPU's) on the call and the all-gather's shard offsets.
template <class Trace>
VerbList ringTrace(const std::string& coll, size_t count, int rank, int n, size_t segmentCount,
                   int root, const std::vector<size_t>& counts, Trace trace) {
  RingCall call{Task{}, rank, n, nullptr, segmentCount};
  call.task.dtype = DType::kUInt8;
  call.task.count = call.task.total = count;
  call.task.root = root;
  std::vector<size_t> offsets(1, 0);
  const CollInfo* info = nullptr;
  for (const CollInfo& row : kCollTable) {
    if (coll == row.name && row.output != Output::kNone) info = &row;  // not barrier
  }
  if (!info) throw std::invalid_argument("unknown collective " + coll);
  if (!info->ring.runs) throw std::invalid_argument("the ring does not run " + coll);
  call.task.coll = info->coll;
  if (info->output == Output::kSumOfShards) {  // all_gather: the shards make the output
    if (counts.size() != static_cast<size_t>(n)) {
      throw std::invalid_argument("all_gather needs one count per rank");
    }
    for (size_t c : counts) offsets.push_back(offsets.back() + c);
    call.offsets = offsets.data();
    call.task.total = offsets.back();
  }
  VerbList out;
  for (const VerbRecord& e : trace(call, offsets)) {
    out.emplace_back(verbName(e.verb), e.start, e.count);
  }
  return out;
}

std::vector<VerbRecord> hostTrace(const RingCall& call, const std::vector<size_t>&) {
  TracePrims counter;  // first how many verbs, then record them
  ringCollective(counter, call);
  std::vector<VerbRecord> records(counter.verbs());
  TracePrims p(records.data(), records.size());
  ringCollective(p, call);
  return records;
}

void bindRingTrace(py::module_& m, const char* name, std::vector<VerbRecord> (*trace)(
                                                         RingCall, const std::vector<size_t>&)) {
  m.def(name, [trace](const std::string& coll, size_t count, int rank, int n, size_t segmentCount,
                      int root, const std::vector<size_t>& counts) {
        return ringTrace(coll, count, rank, n, segmentCount, root, counts, trace);
      }, py::arg("coll"), py::arg("count"), py::arg("rank"), py::arg("size"),
      py::arg("segment_count"), py::arg("root") = 0, py::arg("counts") = std::vector<size_t>{});
}

// For the host path's checks (overlap, piece_table), on C-contiguous arrays:
// whether a and b share no byte (an empty array shares none) ...
bool disjoint(const py::array& a, const py::array& b) {
  return bytesApart(a.data(), static_cast<size_t>(a.nbytes()), b.data(),
                    static_cast<size_t>(b.nbytes()));
}
// ... and whether out takes x's elements as they are: both C-contiguous, out writable, one dtype.
bool takesElementsOf(const py::array& out, const py::array& x) {
  constexpr int kC = py::array::c_style;
  return (x.flags() & kC) && (out.flags() & kC) && out.writeable() && x.dtype().is(out.dtype());
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "dpcore's compiled core: transports, algorithms, reduce kernels";
  py::register_exception<CommError>(m, "CommError", PyExc_RuntimeError);

  m.attr("DTYPES") = names<DType>(kNumDTypes, dtypeName);
  m.attr("REDUCED_DTYPES") = names<DType>(kNumReducedDTypes, dtypeName);  // the rest only move
  m.attr("OPS") = names<ReduceOp>(kNumOps, opName);
  m.attr("COLLECTIVES") = names<Coll>(kNumColls, collName);
  m.attr("ALGORITHMS") = names<Algo>(kNumAlgos, algoName);
  m.attr("COLLECTIVE_TABLE") = collectiveTable();
  // What every transport can divide its ring by (dpcore/limits.h); dpcore/settings.py checks
  // DPCORE_FIFO_SLOTS and DPCORE_SLOT_BYTES against them.
  m.attr("RING_MIN_SLOTS") = kRingMinSlots;
  m.attr("MAX_ELEMENT_BYTES") = kMaxDTypeSize;

  bindBackends(m);
  bindDevice(m);
  bindP2p(m);
  bindPlain(m);

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
      }, "dst[:] = src, C-contiguous arrays, with streaming stores (host/stream_copy.h)");
  m.def("stream_min_bytes", &streamMinBytes,
        "direct writes outputs of at least this many bytes with streaming stores where it can");
  // For the host path's overlap checks: exact for C-contiguous arrays, and a few times
  // cheaper than numpy.may_share_memory, which small calls would feel.
  m.def("overlap", [](const py::array& a, const py::array& b) -> py::object {
        if (disjoint(a, b)) return py::none();
        const auto at = reinterpret_cast<intptr_t>(a.data());
        return py::int_(reinterpret_cast<intptr_t>(b.data()) - at);
      }, "Where C-contiguous b starts, in bytes from a's start, if their memory overlaps; else "
         "None");

  // scatter's root with x as a list (dpcore/comm/pieces.py), in one step: (the uint64 table of
  // the pieces' addresses, as bytes, and its own address) where there are `size` of them, each
  // a C-contiguous NumPy array that out (one too) takes as it is (exact types, out's dtype and
  // size, out writable and apart from every piece); else None, which sends the caller to the
  // full checks. The address comes along because NumPy's (.ctypes.data) costs a microsecond.
  m.def("piece_table", [](py::handle xs, py::handle out, size_t size) -> py::object {
        PyTypeObject* ndarray = py::detail::npy_api::get().PyArray_Type_;
        if (!PyList_CheckExact(xs.ptr()) || Py_TYPE(out.ptr()) != ndarray ||
            static_cast<size_t>(PyList_GET_SIZE(xs.ptr())) != size) {
          return py::none();
        }
        const auto o = py::reinterpret_borrow<py::array>(out);
        // bytes, not a NumPy array: a tenth of the cost to make, and nobody reads it in Python
        auto table = py::reinterpret_steal<py::object>(
            PyBytes_FromStringAndSize(nullptr, static_cast<py::ssize_t>(size * sizeof(uint64_t))));
        if (!table) throw py::error_already_set();
        auto at = reinterpret_cast<uint64_t*>(PyBytes_AS_STRING(table.ptr()));
        for (size_t q = 0; q < size; ++q) {
          py::handle x = PyList_GET_ITEM(xs.ptr(), static_cast<py::ssize_t>(q));
          if (Py_TYPE(x.ptr()) != ndarray) return py::none();
          const auto a = py::reinterpret_borrow<py::array>(x);
          if (a.size() != o.size() || !takesElementsOf(o, a) || !disjoint(a, o)) {
            return py::none();
          }
          at[q] = reinterpret_cast<uintptr_t>(a.data());
        }
        return py::make_tuple(table, reinterpret_cast<uintptr_t>(at));
      }, "The addresses of scatter's pieces, or None (see dpcore/comm/pieces.py)");

  // The tuner behind algo auto (core/tuner.h), on its own, for tests of its policy.
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

  // (verb, start, count) of each verb one rank runs: the schedule of algo/ring.h
  bindRingTrace(m, "ring_trace", [](RingCall call, const std::vector<size_t>& offsets) {
    return hostTrace(call, offsets);
  });

  m.def("exit_after", &exitAfter, py::arg("seconds"), py::arg("status"),
        "End this process with _exit(status) after `seconds` unless it has ended by then (a "
        "thread of its own: it works in MPI_Finalize, after the interpreter finalized)");

  m.def("build_info", [] {
    py::dict info;
    info["native"] = std::string(DPCORE_NATIVE_FLAGS);  // "-march=native" or "": portable
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
  // ring_trace, computed by the GPU: the same templates compiled by nvcc
  bindRingTrace(m, "cuda_ring_trace", &cudaRingTrace);
#endif
}
