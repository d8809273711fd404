// dpcore._C's point-to-point engine (csrc/p2p/): made at init over the communicator's shared
// memory or MPI, ops posted with an address and a byte count (dpcore/comm/p2p.py has checked
// them, and keeps the arrays alive until the op is done), waits that release the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "mpi/mpi_api.h"
#include "p2p/mpi_channel.h"
#include "p2p/p2p_engine.h"
#include "p2p/shm_channel.h"

namespace py = pybind11;

namespace dpcore {

MpiEndpoint mpiEndpointOf(py::tuple t);  // bind_backends.cc

namespace {

// The engine, and its shared-memory channel while its segment's name must be unlinked.
struct P2p {
  std::unique_ptr<P2pEngine> engine;
  ShmChannel* shm = nullptr;
};

// An op as Python holds it: with the engine its waits drive.
struct P2pHandle {
  std::shared_ptr<P2p> p2p;
  std::shared_ptr<P2pOp> op;
};

constexpr int kNotPlain = -2;  // P2p.blocking: not a source (kAnySource is -1, ranks from 0)

}  // namespace

void bindP2p(py::module_& m) {
  m.attr("P2P_MAX_BYTES") = kMaxMessageBytes;
  m.attr("P2P_NOT_PLAIN") = kNotPlain;
  py::class_<P2pHandle>(m, "P2pOp")
      .def("wait", [](P2pHandle& h, double timeout) {
            py::gil_scoped_release release;
            return h.p2p->engine->wait(*h.op, timeout);
          }, py::arg("timeout") = -1.0,
          "Moves the ops until this one is done (true) or `timeout` s passed (false; negative: "
          "no limit); raises its CommError if it failed")
      .def("done", [](P2pHandle& h) { return h.op->finished(); })
      .def("failed", [](P2pHandle& h) {
            return h.op->state.load(std::memory_order_acquire) == P2pOp::kFailed;
          })
      .def_property_readonly("source", [](P2pHandle& h) { return h.op->source; });

  py::class_<P2p, std::shared_ptr<P2p>>(m, "P2p")
      .def_static("shm", [](const std::string& name, bool create, int rank, int size,
                            bool readPeers, double timeout) {
            auto p = std::make_shared<P2p>();
            auto channel = std::make_unique<ShmChannel>(name, create, rank, size, readPeers);
            p->shm = channel.get();
            p->engine = std::make_unique<P2pEngine>(std::move(channel), timeout, true);
            return p;
          }, py::arg("name"), py::arg("create"), py::arg("rank"), py::arg("size"),
          py::arg("read_peers"), py::arg("timeout"))
      // endpoint: as MpiBackend's (dpcore/setup/mpi_endpoint.py), of a communicator of its own
      .def_static("mpi", [](py::tuple endpoint, int anySource, double timeout, bool threaded) {
            auto p = std::make_shared<P2p>();
            p->engine = std::make_unique<P2pEngine>(
                std::make_unique<MpiChannel>(mpiEndpointOf(endpoint), anySource), timeout,
                threaded);
            return p;
          }, py::arg("endpoint"), py::arg("any_source"), py::arg("timeout"),
          py::arg("threaded"))
      .def("unlink", [](P2p& p) {
            if (p.shm) p.shm->unlink();
          })
      // peer: -1 for any source (a receive); array: C-contiguous NumPy, writable for a receive
      // (checked in Python)
      .def("post", [](std::shared_ptr<P2p>& p, bool send, int peer, int tag, int dtype,
                      const py::array& array, bool async) {
            void* data = const_cast<void*>(array.data());
            const size_t nbytes = static_cast<size_t>(array.nbytes());
            std::shared_ptr<P2pOp> op;
            {
              py::gil_scoped_release release;
              op = p->engine->post(send, peer, tag, static_cast<DType>(dtype), data, nbytes,
                                   async);
            }
            return P2pHandle{p, std::move(op)};
          }, py::arg("send"), py::arg("peer"), py::arg("tag"), py::arg("dtype"),
          py::arg("array"), py::arg("async_op"))
      // A user's loop of blocking sends or receives (dpcore/comm/p2p.py), in one step: posted,
      // waited for, its source returned; kNotPlain, with nothing posted, where the array is not
      // the plain case (not C-contiguous, read-only for a receive, too large): the caller then
      // runs the full checks, which say what is wrong. peer and tag are checked already.
      .def("blocking", [](std::shared_ptr<P2p>& p, bool send, int peer, int tag, int dtype,
                          const py::array& array) {
            const auto nbytes = static_cast<size_t>(array.nbytes());
            if (!(array.flags() & py::array::c_style) || (!send && !array.writeable()) ||
                nbytes > kMaxMessageBytes) {
              return kNotPlain;
            }
            void* data = const_cast<void*>(array.data());
            py::gil_scoped_release release;
            const std::shared_ptr<P2pOp> op =
                p->engine->post(send, peer, tag, static_cast<DType>(dtype), data, nbytes, false);
            p->engine->wait(*op, -1.0);
            return op->source;
          }, py::arg("send"), py::arg("peer"), py::arg("tag"), py::arg("dtype"),
          py::arg("array"))
      .def("close", [](P2p& p) { return p.engine->close(); },
           py::call_guard<py::gil_scoped_release>(),
           "Finishes the pending ops or fails them at their deadlines, then leaves; returns the "
           "first failure's message, or ''")
      .def_property_readonly("broken", [](P2p& p) { return p.engine->broken(); });
}

}  // namespace dpcore
