// dpcore._C's DeviceBackend: the device transport (cuda/device_transport.h) behind the Backend
// calls, with device pointers where the CPU backends take NumPy arrays. dpcore/setup/
// device_transport.py sets it up; dpcore/comm/ routes CUDA arrays to it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/collectives.h"
#include "cuda/device_transport.h"
#include "cuda/emulated_memory.h"
#include "cuda/emulated_stream.h"

namespace py = pybind11;

namespace dpcore {
namespace {

using DeviceBackend = Queued<Collectives<DeviceTransport>>;
using ShmBackend = Queued<Collectives<ShmTransport>>;  // bind_backends.cc's

// The emulation runs each kernel on 2 blocks of 4 threads: several blocks and a barrier with
// company, at a cost the CPU can bear.
std::unique_ptr<Device> deviceFor(bool emulated, int index) {
  if (emulated) return makeEmulatedDevice(2, 4);
#ifdef DPCORE_WITH_CUDA
  return makeCudaDevice(index);
#else
  (void)index;
  throw std::runtime_error("dpcore: this build has no CUDA (nvcc was not found when it was "
                           "built); reinstall dpcore where nvcc is on PATH");
#endif
}

// On the caller's thread, when the call is made: the caller's stream as it stands now. A call
// inside a CUDA graph's capture is refused here, before the peers hear of it.
Task deviceTask(DeviceBackend& b, int coll, int dtype, int op, int root, int algo, uintptr_t in,
                uintptr_t out, size_t count, size_t total, uintptr_t stream, uintptr_t splits) {
  if (b.engine().transport().device().capturing(stream)) {
    throw std::invalid_argument("dpcore: the caller's stream is capturing a CUDA graph, and "
                                "dpcore's collectives cannot be captured yet: call it outside "
                                "the capture");
  }
  Task t = taskOf(coll, dtype, op, root, algo, reinterpret_cast<const void*>(in),
                  reinterpret_cast<void*>(out), count, total,
                  b.engine().transport().device().mark(stream));
  t.splits = reinterpret_cast<const uint64_t*>(splits);  // all_to_all's matrix (host memory)
  return t;
}

// The arguments of run_device and submit_device: splits is all_to_all's alone.
#define DP_DEVICE_ARGS                                                                      \
  py::arg("coll"), py::arg("dtype"), py::arg("op"), py::arg("root"), py::arg("algo"),       \
      py::arg("in_ptr"), py::arg("out_ptr"), py::arg("count"), py::arg("total"),            \
      py::arg("stream"), py::arg("splits") = 0

IpcHandle handleOf(const py::bytes& b) {
  const std::string s = b;
  IpcHandle h;
  if (s.size() != sizeof(h.bytes)) throw std::invalid_argument("dpcore: bad IPC handle");
  std::memcpy(h.bytes, s.data(), sizeof(h.bytes));
  return h;
}

// dpcore.emulated's arrays' memory: the emulation's cudaMalloc, which the peers can map,
// freed with the object.
struct EmulatedMemory {
  explicit EmulatedMemory(size_t bytes) : address(emulated::allocate(bytes)) {}
  ~EmulatedMemory() { emulated::release(address); }
  EmulatedMemory(const EmulatedMemory&) = delete;
  EmulatedMemory& operator=(const EmulatedMemory&) = delete;
  void* address;
};

}  // namespace

void bindDevice(py::module_& m) {
  py::class_<DeviceBackend, Backend, std::shared_ptr<DeviceBackend>>(m, "DeviceBackend")
      .def(py::init([](bool emulated, int device, const std::string& name, bool create, int rank,
                       int size, int fifoSlots, size_t slotBytes, size_t oneShotBytes,
                       double timeout, double spinUs) {
             auto dev = deviceFor(emulated, device);
             return std::make_shared<DeviceBackend>(
                 true, false, timeout, std::move(dev), name, create, rank, size,
                 DeviceConfig{fifoSlots, slotBytes, oneShotBytes}, spinUs);
           }),
           py::arg("emulated"), py::arg("device"), py::arg("name"), py::arg("create"),
           py::arg("rank"), py::arg("size"), py::arg("fifo_slots"), py::arg("slot_bytes"),
           py::arg("one_shot_bytes"), py::arg("timeout"), py::arg("spin_us"),
           py::call_guard<py::gil_scoped_release>())
      // At connection: number calls as `host` (the communicator's host backend) does, one count
      // for both sides, and, where host is shared memory, tell a peer on the other side
      // (DeviceTransport::pairWithHost). This backend keeps host alive.
      .def("pair_sides", [](DeviceBackend& b, Backend& host) {
            b.shareOrder(host.order());
            if (auto* shm = dynamic_cast<ShmBackend*>(&host)) {
              b.engine().transport().pairWithHost(shm->engine().transport());
            }
          }, py::arg("host"), py::keep_alive<1, 2>())
      .def_property_readonly("device", [](DeviceBackend& b) {
            return b.engine().transport().device().name();
          })
      // this rank's IPC handles (its slots', its events'), which every peer maps
      .def_property_readonly("handle", [](DeviceBackend& b) {
            return py::bytes(b.engine().transport().handles());
          })
      .def("map_peers", [](DeviceBackend& b, const std::vector<py::bytes>& handles) {
            std::vector<std::string> all(handles.begin(), handles.end());
            py::gil_scoped_release release;
            b.engine().transport().mapPeers(all);
          })
      // comm.alloc(device="cuda"): (this rank's buffer, its handle), then map every rank's
      .def("alloc_region", [](DeviceBackend& b, size_t bytes) {
            IpcHandle h;
            void* p;
            {
              py::gil_scoped_release release;
              p = b.engine().transport().allocRegion(bytes, &h);
            }
            return py::make_tuple(reinterpret_cast<uintptr_t>(p),
                                  py::bytes(h.bytes, sizeof(h.bytes)));
          })
      // comm.register: the handle of the allocation that holds this rank's buffer, and the
      // buffer's offset in it
      .def("export_buffer", [](DeviceBackend& b, uintptr_t ptr, size_t bytes) {
            uint64_t offset = 0;
            IpcHandle h;
            {
              py::gil_scoped_release release;
              h = b.engine().transport().exportBuffer(reinterpret_cast<const void*>(ptr), bytes,
                                                      &offset);
            }
            return py::make_tuple(py::bytes(h.bytes, sizeof(h.bytes)), offset);
          })
      .def("map_region", [](DeviceBackend& b, uint32_t id, size_t bytes,
                            const std::vector<py::bytes>& handles, std::vector<uint64_t> bases,
                            std::vector<uint64_t> offsets, bool owned) {
            std::vector<IpcHandle> all;
            for (const py::bytes& h : handles) all.push_back(handleOf(h));
            py::gil_scoped_release release;
            b.engine().transport().mapRegion(id, bytes, all, bases, offsets, owned);
          })
      // regions every rank dropped: unmap the peers' everywhere, then free this rank's
      .def("unmap_region", [](DeviceBackend& b, uint32_t id) {
            b.engine().transport().unmapRegion(id);
          }, py::call_guard<py::gil_scoped_release>())
      .def("free_region", [](DeviceBackend& b, uint32_t id) {
            b.engine().transport().freeRegion(id);
          }, py::call_guard<py::gil_scoped_release>())
      // the host segment's name (once every rank has mapped it), and the device slots' (once
      // every rank has mapped every peer's)
      .def("unlink", [](DeviceBackend& b) { b.engine().transport().control().unlinkSegment(); })
      .def("unlink_slots", [](DeviceBackend& b) { b.engine().transport().device().unlinkShared(); })
      // What the kernels moved so far (DeviceCounts), once the queued calls are done.
      .def("counts", [](DeviceBackend& b) {
            {
              py::gil_scoped_release release;
              b.drain();
            }
            const DeviceCounts& c = b.engine().transport().counts();
            py::dict d;
            d["kernels"] = c.kernels;
            d["host_waits"] = c.hostWaits;
            d["bytes_read"] = c.bytesRead;
            d["bytes_written"] = c.bytesWritten;
            d["packed_bytes"] = c.packedBytes;
            return d;
          })
      .def("peers_gone", [](DeviceBackend& b) {
            return b.engine().transport().control().peersGone();
          })
      // The collective on device pointers, after the work queued on `stream`; blocking, or
      // queued (submit_device) like the CPU backends' calls.
      .def("run_device", [](DeviceBackend& b, int coll, int dtype, int op, int root, int algo,
                            uintptr_t in, uintptr_t out, size_t count, size_t total,
                            uintptr_t stream, uintptr_t splits) {
            b.run(deviceTask(b, coll, dtype, op, root, algo, in, out, count, total, stream,
                             splits));
          }, DP_DEVICE_ARGS, py::call_guard<py::gil_scoped_release>())
      .def("submit_device", [](DeviceBackend& b, int coll, int dtype, int op, int root, int algo,
                               uintptr_t in, uintptr_t out, size_t count, size_t total,
                               uintptr_t stream, uintptr_t splits) {
            return b.submit(deviceTask(b, coll, dtype, op, root, algo, in, out, count, total,
                                       stream, splits));
          }, DP_DEVICE_ARGS);
  // dpcore.emulated's arrays: their memory (EmulatedMemory, above); ...
  py::class_<EmulatedMemory>(m, "EmulatedMemory")
      .def(py::init<size_t>(), py::arg("nbytes"))
      .def_property_readonly("address", [](const EmulatedMemory& e) {
        return reinterpret_cast<uintptr_t>(e.address);
      });
  // ... a host-to-device copy queued on the caller's stream (it lands late, as
  // cudaMemcpyAsync's), and the host's wait for a stream (cudaStreamSynchronize)
  m.def("emulated_copy", [](uintptr_t stream, uintptr_t dst, const py::bytes& src) {
    auto data = std::make_shared<std::string>(src);  // staged now, as in pinned memory
    callerStream(stream)->enqueue([dst, data] {
      std::memcpy(reinterpret_cast<void*>(dst), data->data(), data->size());
    });
  });
  m.def("emulated_capture", [](uintptr_t stream, bool on) {
    callerStream(stream)->setCapturing(on);
  });
  m.def("emulated_sync", [](uintptr_t stream) {
    auto s = callerStream(stream);
    s->wait(s->tail());
  }, py::call_guard<py::gil_scoped_release>());
}

}  // namespace dpcore
