// The ring's schedule computed on the device: algo/ring.h's templates, compiled by nvcc, run by
// one GPU thread against TracePrims. tests/gpu/test_ring_schedule_device.py compares it with the
// CPU's (_C.ring_trace), so the header a CUDA transport builds on means the same on both sides.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "algo/ring.h"
#include "algo/trace_prims.h"
#include "cuda/cuda_api.h"

namespace dpcore {
namespace {

__global__ void traceRing(RingCall call, VerbRecord* records, size_t capacity, size_t* verbs) {
  TracePrims p(records, capacity);
  ringCollective(p, call);
  *verbs = p.verbs();
}

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string("dpcore cuda: ") + what + ": " + cudaGetErrorString(err));
  }
}

// A device copy of `n` values that frees itself.
template <class T>
struct DeviceArray {
  T* data = nullptr;
  explicit DeviceArray(size_t n) { check(cudaMalloc(&data, (n ? n : 1) * sizeof(T)), "malloc"); }
  ~DeviceArray() { cudaFree(data); }
};

}  // namespace

std::vector<VerbRecord> cudaRingTrace(RingCall call, const std::vector<size_t>& offsets) {
  DeviceArray<size_t> deviceOffsets(offsets.size()), verbs(1);
  check(cudaMemcpy(deviceOffsets.data, offsets.data(), offsets.size() * sizeof(size_t),
                   cudaMemcpyHostToDevice), "copy offsets");
  if (call.offsets) call.offsets = deviceOffsets.data;
  TracePrims counter;  // the host counts, so the device gets room for every record
  RingCall host = call;
  host.offsets = call.offsets ? offsets.data() : nullptr;
  ringCollective(counter, host);
  std::vector<VerbRecord> records(counter.verbs());
  DeviceArray<VerbRecord> deviceRecords(records.size());
  traceRing<<<1, 1>>>(call, deviceRecords.data, records.size(), verbs.data);
  check(cudaGetLastError(), "launch");
  size_t made = 0;
  check(cudaMemcpy(&made, verbs.data, sizeof(size_t), cudaMemcpyDeviceToHost), "copy count");
  if (made != records.size()) throw std::runtime_error("dpcore cuda: the device counted otherwise");
  check(cudaMemcpy(records.data(), deviceRecords.data, records.size() * sizeof(VerbRecord),
                   cudaMemcpyDeviceToHost), "copy records");
  return records;
}

}  // namespace dpcore
