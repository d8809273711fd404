// Types shared by every layer: element types, reduction ops, and the collective header that
// peers compare before they move any data.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define DP_HOST_DEVICE __host__ __device__
#else
#define DP_HOST_DEVICE
#endif

namespace dpcore {

// Values are part of the Python contract (dpcore/dtypes.py mirrors them).
enum class DType : int32_t {
  kFloat16 = 0, kBFloat16 = 1, kFloat32 = 2, kFloat64 = 3,
  kInt8 = 4, kUInt8 = 5, kInt32 = 6, kInt64 = 7,
};
constexpr int kNumDTypes = 8;

// kAvg is a sum whose last reduction also divides by the number of ranks.
enum class ReduceOp : int32_t { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };

enum class Coll : int32_t {
  kBarrier = 0, kAllReduce = 1, kReduceScatter = 2, kAllGather = 3, kBroadcast = 4,
};

DP_HOST_DEVICE inline size_t dtypeSize(DType t) {
  switch (t) {
    case DType::kFloat16: case DType::kBFloat16: return 2;
    case DType::kFloat32: case DType::kInt32: return 4;
    case DType::kFloat64: case DType::kInt64: return 8;
    default: return 1;
  }
}

inline const char* collName(Coll c) {
  switch (c) {
    case Coll::kBarrier: return "barrier";
    case Coll::kAllReduce: return "all_reduce";
    case Coll::kReduceScatter: return "reduce_scatter";
    case Coll::kAllGather: return "all_gather";
    default: return "broadcast";
  }
}

inline const char* dtypeName(DType t) {
  static const char* names[] = {"float16", "bfloat16", "float32", "float64",
                                "int8", "uint8", "int32", "int64"};
  return names[static_cast<int>(t)];
}

inline const char* opName(ReduceOp op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return names[static_cast<int>(op)];
}

// What one rank asked for. Peers publish theirs and compare before moving data, so a mismatched
// call becomes an error on every rank instead of silent corruption. For all_gather, count is this
// rank's own shard (shards may differ), so peers learn every shard length from the headers, and
// total is the output's length; for the others total equals count.
struct CollHeader {
  uint64_t seq;
  int32_t coll;
  int32_t dtype;
  int32_t op;
  int32_t root;
  int32_t algo;
  uint32_t align;  // where this rank's data sits in its slots: see ShmLayout::kAlignSpan
  int32_t pick;    // algo kTuned: the algorithm rank 0 picked (rank 0's header is everyone's)
  uint64_t count;
  uint64_t total;
  uint64_t addr;     // direct algorithm: this rank's input (broadcast: its buffer), as an
  uint64_t outAddr;  // address in its own process, and its output; peers read both
  uint32_t inRegion;   // the shared buffer (cpu/shared_buffers.h) that holds addr's data, or 0;
  uint32_t outRegion;  // and outAddr's (all_reduce)
};

}  // namespace dpcore
