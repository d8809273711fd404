// dpcore._C.PlainCalls: a user's plain call of a collective, checked and run in one compiled
// step. A training loop makes the same call again and again: NumPy arrays in the shapes the
// verb takes, from the communicator's own thread. Where ranks arrive apart, the late rank's own
// call is the loop's whole critical path, and the Python checks it passed cost 0.8-1.2 us of its
// 1.5 us, against 0.9 us for MPI's whole call (mpi4py's calls are compiled;
// benchmarks/results/2026-12-07-late-call.md; what this made of it: 2026-12-07-plain-call.md).
// One argument more through pybind11's dispatch costs a few hundred instructions, so the entry
// is a plain CPython function (METH_FASTCALL).
//
// It takes (coll, x, out, root, op, algo, async_op) as the Python verb received them. Whatever
// it does not know to be a plain call, right or wrong, returns NotImplemented, and the verb
// runs its full checks (dpcore/comm/), which take the rest and say what is wrong. So it must
// refuse everything they refuse: tests/scripts/plain_calls.py holds it to that. It runs
// barrier, all_reduce, reduce, broadcast, gather, scatter (one array) and all_to_all (no
// splits), with any algorithm; reduce_scatter and all_gather, whose calls are large, always
// take the full checks.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <memory>
#include <new>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "algo/exchange.h"
#include "core/backend.h"
#include "dpcore/coll_table.h"
#include "dpcore/error.h"
#include "plain_arrays.h"

namespace py = pybind11;

namespace dpcore {
namespace {

class PlainCalls {
 public:
  // dtypes: (NumPy type number, dpcore code) of the built-in dtypes dpcore moves; reductions:
  // the (dtype code, op code) pairs it reduces; fixed: (collective, algorithm asked for,
  // algorithm run) where choose() takes a fixed algorithm (dpcore/comm/plain.py asks the full
  // checks for all three). bands: the host path's {collective: (lo, hi)}, read on every call, as
  // choose() does; oneShotBytes: the most one_shot takes, asked for by name.
  // failed(error, x, out): a RuntimeError of a call, for the communicator's records;
  // launched(job, result, x, out): the Work of an async call.
  PlainCalls(std::shared_ptr<Backend> backend, int rank, int size, py::dict bands,
             int pastOneShot, size_t oneShotBytes, const std::vector<std::pair<int, int>>& dtypes,
             const std::vector<std::pair<int, int>>& reductions,
             const std::vector<std::tuple<int, int, int>>& fixed, py::object failed,
             py::object launched)
      : backend_(std::move(backend)), rank_(rank), size_(size), bands_(std::move(bands)),
        pastOneShot_(pastOneShot), oneShotBytes_(oneShotBytes), failed_(std::move(failed)),
        launched_(std::move(launched)), arrays_(dtypes) {
    for (auto [dtype, op] : reductions) {
      if (dtype < 0 || dtype >= kNumDTypes || op < 0 || op >= kNumOps) {
        throw std::invalid_argument("dpcore: a reduction out of the plain call's table");
      }
      reduces_[dtype][op] = true;
    }
    for (auto& row : fixed_) row.fill(-1);
    for (auto [coll, asked, run] : fixed) {
      if (coll < 0 || coll >= kNumColls || asked < 0 || asked >= kNumAlgos || run < 0 ||
          run >= kNumAlgos) {
        throw std::invalid_argument("dpcore: an algorithm out of the plain call's table");
      }
      fixed_[coll][asked] = run;
    }
    for (int k = 0; k < kNumAlgos; ++k) algos_[k] = interned(algoName(static_cast<Algo>(k)));
    for (int op = 0; op < kNumOps; ++op) ops_[op] = interned(opName(static_cast<ReduceOp>(op)));
    for (int c = 0; c < kNumColls; ++c) colls_[c] = interned(collName(static_cast<Coll>(c)));
  }

  // The thread that may call (threading.get_ident): the communicator's owner, or its lendee.
  unsigned long owner = 0;

  // After close() every call takes the full checks, which refuse it.
  void close() { backend_.reset(); }

  PyObject* call(PyObject* const* args) {
    PyObject *x = args[1], *out = args[2], *root = args[3], *op = args[4];
    const int asked = nameIn(args[5], algos_);  // the algorithm asked for by name, or -1
    if (!backend_ || PyThread_get_thread_ident() != owner || asked < 0 ||
        (args[6] != Py_False && args[6] != Py_True)) {
      return notPlain();
    }
    const long coll = PyLong_AsLong(args[0]);
    if (coll == -1 && PyErr_Occurred()) return nullptr;
    const bool async = args[6] == Py_True;
    PlainArray a, o;
    switch (static_cast<Coll>(coll)) {
      case Coll::kBarrier:  // x: the empty array Python passes for its buffers
        if (!read(x, &a)) return notPlain();
        return launch(Coll::kBarrier, a, 0, 0, static_cast<int>(Algo::kOneShot), a.data, a.data,
                      0, 0, py::none(), x, x, async);
      case Coll::kAllReduce: {
        const int opc = read(x, &a) ? reduction(a, op) : -1;
        if (opc < 0) return notPlain();
        return elementwise(Coll::kAllReduce, a, x, out, 0, opc, asked, async);
      }
      case Coll::kReduce: {
        int r;
        const int opc = read(x, &a) ? reduction(a, op) : -1;
        if (opc < 0 || !rankOf(root, &r)) return notPlain();
        if (r == rank_) return elementwise(Coll::kReduce, a, x, out, r, opc, asked, async);
        if (out != Py_None) return notPlain();
        return launch(Coll::kReduce, a, opc, r, algoFor(Coll::kReduce, asked, a.nbytes()),
                      a.data, nullptr, a.count, a.count, py::none(), x, Py_None, async);
      }
      case Coll::kBroadcast: {
        int r;
        if (!read(x, &a) || !a.writable || !rankOf(root, &r)) return notPlain();
        return launch(Coll::kBroadcast, a, 0, r, algoFor(Coll::kBroadcast, asked, a.nbytes()),
                      a.data, a.data, a.count, a.count, py::reinterpret_borrow<py::object>(x), x,
                      x, async);
      }
      case Coll::kGather: {  // out on the root alone, apart from its shard
        int r;
        if (!read(x, &a) || !rankOf(root, &r) || (out == Py_None) != (r != rank_)) {
          return notPlain();
        }
        const int algo = algoFor(Coll::kGather, asked, a.nbytes());
        if (out == Py_None) {
          return launch(Coll::kGather, a, 0, r, algo, a.data, a.data, a.count, 0, py::none(), x,
                        Py_None, async);
        }
        if (!read(out, &o) || o.dtype != a.dtype || !o.writable || !o.apartFrom(a)) {
          return notPlain();
        }
        return launch(Coll::kGather, a, 0, r, algo, a.data, o.data, a.count, o.count,
                      py::reinterpret_borrow<py::object>(out), x, out, async);
      }
      case Coll::kScatter: {  // x (one array) on the root alone, apart from its out
        int r;
        if (!read(out, &o) || !o.writable || !rankOf(root, &r) || (x == Py_None) != (r != rank_)) {
          return notPlain();
        }
        if (x != Py_None && (!read(x, &a) || a.dtype != o.dtype || !o.apartFrom(a))) {
          return notPlain();
        }
        const bool isRoot = x != Py_None;
        const int algo = algoFor(Coll::kScatter, asked, isRoot ? a.nbytes() : 0);
        return launch(Coll::kScatter, o, 0, r, algo, isRoot ? a.data : o.data, o.data,
                      isRoot ? a.count : 0, o.count, py::reinterpret_borrow<py::object>(out), x,
                      out, async);
      }
      case Coll::kAllToAll: {  // without splits: x.size / size elements to each rank
        const int algo = read(x, &a) && a.count % size_ == 0
                             ? algoFor(Coll::kAllToAll, asked, a.nbytes()) : -1;
        if (algo < 0) return notPlain();
        py::object result;
        if (out == Py_None) {
          result = arrays_.emptyLike(x, a);
          if (!result) return nullptr;
          read(result.ptr(), &o);
        } else if (read(out, &o) && o.dtype == a.dtype && o.count == a.count && o.writable &&
                   o.apartFrom(a)) {  // in any shape
          result = py::reinterpret_borrow<py::object>(out);
        } else {
          return notPlain();
        }
        return launch(Coll::kAllToAll, a, 0, 0, algo, a.data, o.data, a.count, o.count, result,
                      x, result.ptr(), async);
      }
      default:
        return notPlain();
    }
  }

 private:
  static PyObject* notPlain() {
    Py_INCREF(Py_NotImplemented);
    return Py_NotImplemented;
  }
  // as Python's own literals are, so that a caller's "sum" is ours by its address
  static py::str interned(const char* name) {
    auto s = py::reinterpret_steal<py::str>(PyUnicode_InternFromString(name));
    if (!s) throw py::error_already_set();
    return s;
  }

  // The index of the name s equals, or -1. An interned s (a literal in the caller's code) is
  // found by its address alone; any other str is compared only once no address matched.
  template <size_t N>
  static int nameIn(PyObject* s, const std::array<py::str, N>& names) {
    for (size_t k = 0; k < N; ++k) {
      if (s == names[k].ptr()) return static_cast<int>(k);
    }
    if (!PyUnicode_CheckExact(s)) return -1;
    for (size_t k = 0; k < N; ++k) {
      if (PyUnicode_Compare(s, names[k].ptr()) == 0) return static_cast<int>(k);
    }
    return -1;
  }

  bool read(PyObject* o, PlainArray* p) const { return arrays_.read(o, p); }

  // The op code of a reduction of a's dtype by `op`, or -1 where it is not one dpcore runs.
  int reduction(const PlainArray& a, PyObject* op) const {
    const int k = nameIn(op, ops_);
    return k >= 0 && reduces_[a.dtype][k] ? k : -1;
  }

  bool rankOf(PyObject* root, int* r) const {  // an exact int in [0, size)
    if (!PyLong_CheckExact(root)) return false;
    const long value = PyLong_AsLong(root);
    if (value == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    if (value < 0 || value >= size_) return false;
    *r = static_cast<int>(value);
    return true;
  }

  // The algorithm code a call of nbytes runs, as choose() gives it (dpcore/comm/choice.py); -1
  // where the full checks must say: an algorithm choose() refuses for this collective or size,
  // or auto's band not computed yet (choose() computes it). auto: each rank's own pick in C++
  // for the exchanges, else one_shot inside the band and past it beyond.
  int algoFor(Coll coll, int asked, size_t nbytes) const {
    if (asked != static_cast<int>(Algo::kAuto)) {
      const int run = fixed_[static_cast<int>(coll)][asked];
      return run == static_cast<int>(Algo::kOneShot) && nbytes > oneShotBytes_ ? -1 : run;
    }
    if (isExchange(coll)) return static_cast<int>(Algo::kAuto);
    PyObject* band = PyDict_GetItemWithError(bands_.ptr(), colls_[static_cast<int>(coll)].ptr());
    if (!band || !PyTuple_CheckExact(band) || PyTuple_GET_SIZE(band) != 2) return -1;
    const long long lo = PyLong_AsLongLong(PyTuple_GET_ITEM(band, 0));
    const long long hi = PyLong_AsLongLong(PyTuple_GET_ITEM(band, 1));
    if (PyErr_Occurred()) {  // not a band of ints: choose() will say
      PyErr_Clear();
      return -1;
    }
    const auto bytes = static_cast<long long>(nbytes);
    return lo <= bytes && bytes <= hi ? static_cast<int>(Algo::kOneShot) : pastOneShot_;
  }

  // all_reduce, or reduce on its root: into out, or a new array like x where out is None
  PyObject* elementwise(Coll coll, const PlainArray& a, PyObject* x, PyObject* out, int root,
                        int op, int asked, bool async) {
    const int algo = algoFor(coll, asked, a.nbytes());
    if (algo < 0) return notPlain();
    py::object result;
    PlainArray o;
    if (out == Py_None) {
      result = arrays_.emptyLike(x, a);
      if (!result) return nullptr;
      read(result.ptr(), &o);
    } else if (read(out, &o) && o.takesResultOf(a)) {
      result = py::reinterpret_borrow<py::object>(out);
    } else {
      return notPlain();
    }
    return launch(coll, a, op, root, algo, a.data, o.data, a.count, a.count, result, x,
                  result.ptr(), async);
  }

  // The checked call, blocking or queued; the result, the Work, or the call's error.
  PyObject* launch(Coll coll, const PlainArray& a, int op, int root, int algo, const void* in,
                   void* outData, size_t count, size_t total, py::object result, PyObject* x,
                   PyObject* out, bool async) {
    if (algo < 0) return notPlain();
    const Task task = taskOf(static_cast<int>(coll), a.dtype, op, root, algo, in, outData,
                             count, total);
    try {
      if (!async) {
        {
          py::gil_scoped_release release;
          backend_->run(task);
        }
        return result.release().ptr();
      }
      py::object job = py::cast(backend_->submit(task));
      return launched_(job, result, py::handle(x), py::handle(out)).release().ptr();
    } catch (...) {
      raiseCurrent();
    }
    if (PyErr_ExceptionMatches(PyExc_RuntimeError)) {  // a CommError: the call failed
      py::error_already_set error;
      try {
        failed_(error.value(), py::handle(x), py::handle(out));
      } catch (py::error_already_set&) {  // the call's own error is the one to raise
      }
      error.restore();
    }
    return nullptr;
  }

  // The call's error as the bound Backend.run raises it (pybind11's translators, which are
  // not public API before pybind11 3): the errors the C++ call path throws.
  void raiseCurrent() const {
    try {
      throw;
    } catch (const CommError& e) {  // and Refused: every rank refused the call alike
      PyErr_SetString(commError_.ptr(), e.what());
    } catch (py::error_already_set& e) {
      e.restore();
    } catch (const std::invalid_argument& e) {  // InvalidCall: this rank's bad output
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const std::bad_alloc&) {
      PyErr_NoMemory();
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (...) {
      PyErr_SetString(PyExc_RuntimeError, "dpcore: an unknown C++ exception");
    }
  }

  std::shared_ptr<Backend> backend_;
  int rank_, size_;
  py::dict bands_;
  int pastOneShot_;
  size_t oneShotBytes_;
  py::object failed_, launched_;
  PlainArrays arrays_;
  py::object commError_ = py::module_::import("dpcore._C").attr("CommError");
  std::array<py::str, kNumAlgos> algos_;
  std::array<std::array<int, kNumAlgos>, kNumColls> fixed_{};
  bool reduces_[kNumDTypes][kNumOps] = {};
  std::array<py::str, kNumOps> ops_;
  std::array<py::str, kNumColls> colls_;
};

constexpr const char* kCapsule = "dpcore.PlainCalls";

PyObject* entry(PyObject* self, PyObject* const* args, Py_ssize_t n) {
  if (n != 7) {
    PyErr_SetString(PyExc_TypeError,
                    "dpcore: plain_call takes (coll, x, out, root, op, algo, async_op)");
    return nullptr;
  }
  auto* calls = static_cast<std::shared_ptr<PlainCalls>*>(PyCapsule_GetPointer(self, kCapsule));
  return calls ? (*calls)->call(args) : nullptr;
}

// METH_FASTCALL: the arguments as a C array, no tuple made (CPython's cast of its signature)
PyMethodDef kEntry = {"plain_call",
                      reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&entry)),
                      METH_FASTCALL,
                      "plain_call(coll, x, out, root, op, algo, async_op): the result, a Work, "
                      "or NotImplemented where the call needs the full checks"};

}  // namespace

void bindPlain(py::module_& m) {
  m.attr("PLAIN_TYPE_NUMS") = kPlainTypeNums;  // the NumPy type numbers the dtypes table holds
  py::class_<PlainCalls, std::shared_ptr<PlainCalls>>(m, "PlainCalls")
      .def(py::init<std::shared_ptr<Backend>, int, int, py::dict, int, size_t,
                    const std::vector<std::pair<int, int>>&,
                    const std::vector<std::pair<int, int>>&,
                    const std::vector<std::tuple<int, int, int>>&, py::object, py::object>(),
           py::arg("backend"), py::arg("rank"), py::arg("size"), py::arg("bands"),
           py::arg("past_one_shot"), py::arg("one_shot_bytes"), py::arg("dtypes"),
           py::arg("reductions"), py::arg("fixed"), py::arg("failed"), py::arg("launched"))
      .def_readwrite("owner", &PlainCalls::owner)
      .def("close", &PlainCalls::close)
      // A function of its own, not a method: it holds the calls, which hold none of its
      // callers' objects, so a communicator that keeps it makes no cycle.
      .def("entry", [](std::shared_ptr<PlainCalls> self) {
        auto* held = new std::shared_ptr<PlainCalls>(std::move(self));
        PyObject* capsule = PyCapsule_New(held, kCapsule, [](PyObject* c) {
          delete static_cast<std::shared_ptr<PlainCalls>*>(PyCapsule_GetPointer(c, kCapsule));
        });
        if (!capsule) {
          delete held;
          throw py::error_already_set();
        }
        auto function = py::reinterpret_steal<py::object>(PyCFunction_NewEx(&kEntry, capsule,
                                                                            nullptr));
        Py_DECREF(capsule);  // the function holds it
        if (!function) throw py::error_already_set();
        return function;
      });
}

}  // namespace dpcore
