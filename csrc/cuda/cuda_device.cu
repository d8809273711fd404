// The GPU behind cuda/device.h: one non-blocking stream per communicator, kernels
// (cuda/reduce_copy.h: reduceCopy, and a copy's own) queued on it, memory the peers map through
// CUDA IPC, and completion seen through a word of mapped host memory into which each kernel's
// last block stores its ticket (device_layer.h; the blocks count in device memory, since atomics
// on host memory need host-native atomics, which an x86 host over PCIe lacks): the host learns a
// kernel ended by reading memory, as a peer's host learns it from the host's post, and no kernel
// ever waits for another process's. The ring's steps are ordered between ranks by interprocess
// events (cudaEventInterprocess): the reader's stream waits for the writer's event, so the host
// waits once per call, not once per step.
#include <cuda.h>
#include <cuda_runtime.h>
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/cuda_api.h"
#include "cuda/device.h"

namespace dpcore {
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string("dpcore cuda: ") + what + ": " + cudaGetErrorString(err));
  }
}

// device made current for a scope, the caller's current device restored after it: the threads
// that call in (a caller's, at the call; the worker) keep the device they had chosen
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    check(cudaGetDevice(&saved_), "get device");
    if (saved_ != device) check(cudaSetDevice(device), "set device");
    changed_ = saved_ != device;
  }
  ~CurrentDevice() {
    if (changed_) cudaSetDevice(saved_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int saved_ = 0;
  bool changed_ = false;
};

// Where the allocation that holds p starts, and its size (the driver's cuMemGetAddressRange,
// reached through the runtime, so that the module links no libcuda and loads without a GPU).
void allocationOf(const void* p, CUdeviceptr* base, size_t* bytes) {
  using GetAddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  static GetAddressRange getRange = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    check(cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault,
                                           &found), "find cuMemGetAddressRange");
    if (found != cudaDriverEntryPointSuccess) {
      throw std::runtime_error("dpcore cuda: the driver has no cuMemGetAddressRange");
    }
    return reinterpret_cast<GetAddressRange>(fn);
  }();
  if (getRange(base, bytes, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS) {
    throw std::invalid_argument("dpcore: this pointer is not in an allocation of the CUDA device");
  }
}

constexpr unsigned kThreads = 256;
// The blocks of a copy each multiprocessor holds at once: ptxas keeps copyKernel's registers
// within them (tests/test_cuda_static.py checks the count). A reduction's registers depend on
// its dtype and op (40 to 89), and asking them to fit four spills: its grid is what fits.
constexpr unsigned kCopyBlocksPerMultiprocessor = 4;

template <class E, class Op>
__global__ void __launch_bounds__(kThreads) reduceCopyKernel(ReduceCopyArgs args) {
  reduceCopy<E, Op>(KernelThread{}, args);
}

__global__ void __launch_bounds__(kThreads, kCopyBlocksPerMultiprocessor)
    copyKernel(ReduceCopyArgs args, unsigned elemSize) {
  copyPacked(KernelThread{}, args, elemSize);
}

// How many blocks of `kernel` fit on a multiprocessor at once (its registers and threads), as
// the occupancy calculator says for the current device; asked once per kernel, since a process
// drives one kind of GPU.
template <class Kernel>
unsigned blocksThatFit(Kernel kernel) {
  int blocks = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, 0),
        "ask the occupancy calculator");
  return static_cast<unsigned>(std::max(blocks, 1));
}

// Enough blocks that each thread moves a few packs, and no more than fit on the GPU at once: a
// block that has to wait for another to end would add a wave to the kernel. (Ranks that share a
// GPU take turns on it.)
unsigned gridFor(size_t count, size_t elemSize, int multiprocessors, unsigned fit) {
  const size_t packs = (count * elemSize + 15) / 16;
  const size_t wanted = (packs + 4 * kThreads - 1) / (4 * kThreads);
  const size_t most = static_cast<size_t>(fit) * multiprocessors;
  return static_cast<unsigned>(wanted < 1 ? 1 : wanted > most ? most : wanted);
}

// Queues reduceCopy, or the copy's own kernel (copiesOnly), on `stream`.
void launchReduceCopy(DType dtype, ReduceOp op, const ReduceCopyArgs& args,
                      int multiprocessors, cudaStream_t stream) {
  const size_t elemSize = dtypeSize(dtype);
  if (copiesOnly(args)) {
    static const unsigned fit = blocksThatFit(copyKernel);
    copyKernel<<<gridFor(args.count, elemSize, multiprocessors, fit), kThreads, 0, stream>>>(
        args, static_cast<unsigned>(elemSize));
  } else {
    dispatchReduceCopy(dtype, op, [&](auto element, auto reduceOp) {
      const auto kernel = reduceCopyKernel<decltype(element), decltype(reduceOp)>;
      static const unsigned fit = blocksThatFit(kernel);
      kernel<<<gridFor(args.count, elemSize, multiprocessors, fit), kThreads, 0, stream>>>(args);
    });
  }
  check(cudaGetLastError(), "launch a kernel");
}

class CudaDevice : public Device {
 public:
  explicit CudaDevice(int device) : device_(device) {
    CurrentDevice current(device_);
    check(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, device_),
          "count multiprocessors");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "create stream");
    check(cudaHostAlloc(reinterpret_cast<void**>(&doneHost_), sizeof(uint64_t),
                        cudaHostAllocMapped), "allocate the completion counter");
    *doneHost_ = 0;
    check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&doneDevice_), doneHost_, 0),
          "map the completion counter");
    check(cudaMalloc(reinterpret_cast<void**>(&arrivals_), sizeof(uint64_t)),
          "allocate the blocks' counter");
    check(cudaMemset(arrivals_, 0, sizeof(uint64_t)), "clear the blocks' counter");
    check(cudaDeviceSynchronize(), "clear the blocks' counter");
  }
  ~CudaDevice() override {
    int saved = 0;
    cudaGetDevice(&saved);
    cudaSetDevice(device_);
    // after a failed call, a wait for a dead peer's event may never end (not seen on a GPU yet)
    if (!abandoned_) cudaStreamSynchronize(stream_);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    for (auto& [peer, events] : peerEvents_) {
      for (cudaEvent_t e : events) cudaEventDestroy(e);
    }
    for (void* p : opened_) cudaIpcCloseMemHandle(p);
    for (void* p : owned_) cudaFree(p);
    cudaFreeHost(doneHost_);
    cudaFree(arrivals_);
    cudaStreamDestroy(stream_);
    cudaSetDevice(saved);
  }

  std::string name() const override { return "cuda:" + std::to_string(device_); }

  void* allocShared(size_t bytes, IpcHandle* handle) override {
    static_assert(sizeof(cudaIpcMemHandle_t) <= sizeof(IpcHandle), "IPC handle too large");
    CurrentDevice current(device_);
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "allocate the transport's buffers");
    owned_.push_back(p);
    // on our stream, and ended before a peer can have the handle: its kernels run on streams
    // of its own, which nothing orders after ours
    check(cudaMemsetAsync(p, 0, bytes, stream_), "clear the transport's buffers");
    check(cudaStreamSynchronize(stream_), "clear the transport's buffers");
    cudaIpcMemHandle_t h;
    check(cudaIpcGetMemHandle(&h, p), "export an IPC handle");
    std::memset(handle->bytes, 0, sizeof(handle->bytes));
    std::memcpy(handle->bytes, &h, sizeof(h));
    return p;
  }

  void* openShared(const IpcHandle& handle, size_t) override {
    CurrentDevice current(device_);
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle.bytes, sizeof(h));
    void* p = nullptr;
    check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess),
          "map a peer's buffers (cudaIpcOpenMemHandle)");
    opened_.push_back(p);
    return p;
  }

  void unlinkShared() override {}  // an IPC handle names nothing that could outlive the process

  void freeShared(void* p) override {
    CurrentDevice current(device_);
    check(cudaStreamSynchronize(stream_), "finish the work on a buffer before freeing it");
    owned_.erase(std::remove(owned_.begin(), owned_.end(), p), owned_.end());
    check(cudaFree(p), "free a buffer");
  }

  void closeShared(void* p) override {
    CurrentDevice current(device_);
    opened_.erase(std::remove(opened_.begin(), opened_.end(), p), opened_.end());
    check(cudaIpcCloseMemHandle(p), "unmap a peer's buffer");
  }

  IpcHandle exportMemory(const void* p, size_t bytes, uint64_t* offset) override {
    CurrentDevice current(device_);
    CUdeviceptr base = 0;
    size_t size = 0;
    allocationOf(p, &base, &size);
    const auto at = reinterpret_cast<CUdeviceptr>(p);
    if (at + bytes > base + size) {
      throw std::invalid_argument("dpcore: the buffer spans more than one CUDA allocation");
    }
    cudaIpcMemHandle_t h;
    const cudaError_t exported = cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(base));
    if (exported != cudaSuccess) {
      cudaGetLastError();  // not sticky: clear it
      throw std::invalid_argument(
          std::string("dpcore: cudaIpcGetMemHandle refused the buffer's allocation (") +
          cudaGetErrorString(exported) + "): comm.register takes memory from cudaMalloc, as "
          "CuPy's default pool and torch's caching allocator (without expandable_segments) "
          "give");
    }
    IpcHandle handle;
    std::memset(handle.bytes, 0, sizeof(handle.bytes));
    std::memcpy(handle.bytes, &h, sizeof(h));
    *offset = at - base;
    return handle;
  }

  bool capturing(uintptr_t stream) override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    check(cudaStreamIsCapturing(reinterpret_cast<cudaStream_t>(stream), &status),
          "ask whether the caller's stream is capturing");
    return status != cudaStreamCaptureStatusNone;
  }

  uint64_t mark(uintptr_t stream) override {
    CurrentDevice current(device_);
    cudaEvent_t ready;
    check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "create an event");
    const cudaError_t recorded = cudaEventRecord(ready, reinterpret_cast<cudaStream_t>(stream));
    if (recorded != cudaSuccess) cudaEventDestroy(ready);
    check(recorded, "record the caller's stream");
    return marks_.add(ready);
  }

  bool passed(uint64_t mark) override {
    const cudaError_t state = cudaEventQuery(marks_.get(mark));
    if (state == cudaErrorNotReady) return false;
    check(state, "the caller's stream failed");
    return true;
  }

  void follow(uint64_t mark) override {
    CurrentDevice current(device_);
    std::vector<cudaEvent_t> taken = marks_.take(mark);
    const cudaError_t waited = cudaStreamWaitEvent(stream_, taken.back(), 0);
    for (cudaEvent_t e : taken) cudaEventDestroy(e);  // freed once the wait has passed
    check(waited, "wait for the caller's stream");
  }

  uint64_t launch(DType dtype, ReduceOp op, ReduceCopyArgs args) override {
    CurrentDevice current(device_);
    args.arrivals = arrivals_;
    args.done = doneDevice_;
    args.ticket = ++launched_;
    launchReduceCopy(dtype, op, args, multiprocessors_, stream_);
    return args.ticket;
  }

  bool onHostCores() const override { return false; }
  void idle(uint64_t) override { sched_yield(); }  // the kernel needs no core
  bool done(uint64_t ticket) override {
    if (acquireLoad(doneHost_) >= ticket) return true;
    const cudaError_t state = cudaStreamQuery(stream_);
    if (state == cudaErrorNotReady) return false;
    check(state, "a kernel failed");
    // The stream is idle: every kernel's last block has published before it ended.
    if (acquireLoad(doneHost_) >= ticket) return true;
    throw std::runtime_error("dpcore cuda: the stream is idle, but its kernels did not all "
                             "report their end");
  }

  std::string makeEvents(int count) override {
    CurrentDevice current(device_);
    std::string handles;
    for (int k = 0; k < count; ++k) {
      cudaEvent_t e;
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming | cudaEventInterprocess),
            "create an interprocess event");
      events_.push_back(e);
      cudaIpcEventHandle_t h;
      check(cudaIpcGetEventHandle(&h, e), "export an event");
      handles.append(reinterpret_cast<const char*>(&h), sizeof(h));
    }
    return handles;
  }

  void openEvents(int peer, const std::string& handles) override {
    CurrentDevice current(device_);
    if (handles.size() % sizeof(cudaIpcEventHandle_t)) {
      throw std::invalid_argument("dpcore: bad event handles");
    }
    std::vector<cudaEvent_t>& events = peerEvents_[peer];
    for (size_t at = 0; at < handles.size(); at += sizeof(cudaIpcEventHandle_t)) {
      cudaIpcEventHandle_t h;
      std::memcpy(&h, handles.data() + at, sizeof(h));
      cudaEvent_t e;
      check(cudaIpcOpenEventHandle(&e, h), "open a peer's event (cudaIpcOpenEventHandle)");
      events.push_back(e);
    }
  }

  void record(int event) override {
    CurrentDevice current(device_);
    check(cudaEventRecord(events_.at(event), stream_), "record an event");
  }

  void await(int peer, int event) override {
    CurrentDevice current(device_);
    check(cudaStreamWaitEvent(stream_, peerEvents_.at(peer).at(event), 0),
          "wait for a peer's event");
  }

  void abandon() override { abandoned_ = true; }

 private:
  int device_;
  int multiprocessors_ = 0;
  cudaStream_t stream_ = nullptr;
  uint64_t* doneHost_ = nullptr;    // the last kernel that ended (its ticket), as the host reads it
  uint64_t* doneDevice_ = nullptr;  // the same word, as kernels reach it
  uint64_t* arrivals_ = nullptr;    // the running kernel's blocks that ended, in device memory
  uint64_t launched_ = 0;
  std::vector<void*> owned_, opened_;
  std::vector<cudaEvent_t> events_;                      // this rank's interprocess events
  std::map<int, std::vector<cudaEvent_t>> peerEvents_;  // the peers', opened here, by rank
  bool abandoned_ = false;
  Marks<cudaEvent_t> marks_;
};

}  // namespace

std::unique_ptr<Device> makeCudaDevice(int device) {
  if (!cudaAvailable()) throw std::runtime_error("dpcore: no usable GPU (cudaGetDeviceCount)");
  return std::make_unique<CudaDevice>(device);
}

// out = a op b on `stream`, through the same kernel the transport runs (tests/gpu).
void cudaReduce2(DType dtype, ReduceOp op, const void* a, const void* b, void* out, size_t count,
                 int divisor, void* streamPtr) {
  if (count == 0) return;
  ReduceCopyArgs args;
  args.srcs[0] = a;
  args.srcs[1] = b;
  args.numSrcs = 2;
  args.dsts[0] = out;
  args.numDsts = 1;
  args.count = count;
  args.divisor = divisor;
  int device = 0, multiprocessors = 0;
  check(cudaGetDevice(&device), "get device");
  check(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device),
        "count multiprocessors");
  launchReduceCopy(dtype, op, args, multiprocessors, static_cast<cudaStream_t>(streamPtr));
}

}  // namespace dpcore
