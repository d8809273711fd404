// A device as the device transport (cuda/device_transport.h) drives it: memory the peers map,
// kernels queued in order on one stream of its own, and their completion as the host sees it.
// Two implementations: the GPU (cuda/cuda_device.cu, CUDA runtime and IPC) and the CPU
// emulation (cuda/emulated_device.cc: shared-memory segments, kernels on std::threads), which
// is what runs in CI. No CUDA header here, so the transport compiles with g++ alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "cuda/reduce_copy.h"

namespace dpcore {

// What a peer needs to map an allocation: cudaIpcMemHandle_t (64 bytes), or the emulation's
// segment name.
struct IpcHandle {
  char bytes[64];
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;  // "cuda:0", "emulated"

  // Memory of this device that the peers map (freed with the Device), and a peer's, mapped
  // here (unmapped with the Device). unlinkShared: every peer has mapped what this rank shared
  // (the emulation then removes the segments' names, so nothing outlives a crash).
  virtual void* allocShared(size_t bytes, IpcHandle* handle) = 0;
  virtual void* openShared(const IpcHandle& handle, size_t bytes) = 0;
  virtual void unlinkShared() = 0;

  // Work, queued in order: `afterStream` makes what follows wait for the work queued so far on
  // a caller's stream (a cudaStream_t, 0: the legacy default stream); launch queues a
  // reduceCopy and returns its ticket; done(ticket) is whether that kernel and every earlier
  // one have finished and their stores are visible here and to the peers' next kernels.
  virtual void afterStream(uintptr_t stream) = 0;
  virtual uint64_t launch(DType dtype, ReduceOp op, ReduceCopyArgs args) = 0;
  virtual bool done(uint64_t ticket) = 0;  // throws if the device reported an error
};

// The emulation, with `blocks` x `threads` std::threads per kernel (small grids: one per call).
std::unique_ptr<Device> makeEmulatedDevice(unsigned blocks, unsigned threads);
// The GPU `device` of this process, or an error that says why not (no CUDA build, no GPU).
std::unique_ptr<Device> makeCudaDevice(int device);

}  // namespace dpcore
