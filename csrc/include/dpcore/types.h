// The words every layer shares: element types, reduction ops, collectives and algorithms. Their
// names are bound to Python once (bindings.cc), so dpcore/ never repeats a code. A collective's
// name, with the rest of what it is and costs, is its row of coll_table.h.
#pragma once

#include <cstddef>
#include <cstdint>

// Marks what the CPU and CUDA code both compile: the ring math and the ring's schedule.
#if defined(__CUDACC__)
#define DP_HOST_DEVICE __host__ __device__
#else
#define DP_HOST_DEVICE
#endif

namespace dpcore {

enum class DType : int32_t {
  kFloat16 = 0, kBFloat16 = 1, kFloat32 = 2, kFloat64 = 3,
  kInt8 = 4, kUInt8 = 5, kInt32 = 6, kInt64 = 7, kUInt32 = 8, kUInt64 = 9,
  // Moved, never reduced: the collectives that only move data take them in their own dtype, so
  // every rank's header says what its bytes mean (a bool array against a uint8 one of as many
  // bytes is a mismatch, not reinterpreted bits). They travel as they are (dtypeReduces).
  kBool = 10, kInt16 = 11, kUInt16 = 12, kComplex64 = 13,
};
constexpr int kNumDTypes = 14;
constexpr int kNumReducedDTypes = 10;  // the codes below it reduce

DP_HOST_DEVICE constexpr bool dtypeReduces(DType t) {
  return static_cast<int>(t) < kNumReducedDTypes;
}

// kAvg is a sum whose last reduction also divides by the number of ranks.
enum class ReduceOp : int32_t { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };
constexpr int kNumOps = 5;

enum class Coll : int32_t {
  kBarrier = 0, kAllReduce = 1, kReduceScatter = 2, kAllGather = 3, kBroadcast = 4,
  kReduce = 5, kGather = 6, kScatter = 7, kAllToAll = 8,
};
constexpr int kNumColls = 9;

// kAuto: the ring or direct, whichever rank 0 picks (core/tuner.h); dpcore/cost/auto.py has
// already sent small calls to kOneShot. kCountsOnly: only the headers travel (all_gather without
// out= learns the shard sizes first, and so does a gather's root without out=: core/call.h).
enum class Algo : int32_t { kOneShot = 0, kRing = 1, kCountsOnly = 2, kDirect = 3, kAuto = 4 };
constexpr int kNumAlgos = 5;

DP_HOST_DEVICE inline size_t dtypeSize(DType t) {
  switch (t) {
    case DType::kFloat16: case DType::kBFloat16: case DType::kInt16: case DType::kUInt16:
      return 2;
    case DType::kFloat32: case DType::kInt32: case DType::kUInt32: return 4;
    case DType::kFloat64: case DType::kInt64: case DType::kUInt64: case DType::kComplex64:
      return 8;
    default: return 1;
  }
}
constexpr size_t kMaxDTypeSize = 8;  // float64, int64, uint64, complex64

inline const char* dtypeName(DType t) {
  static const char* names[] = {"float16", "bfloat16", "float32", "float64", "int8",
                                "uint8",   "int32",    "int64",   "uint32",  "uint64",
                                "bool",    "int16",    "uint16",  "complex64"};
  return names[static_cast<int>(t)];
}

inline const char* opName(ReduceOp op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return names[static_cast<int>(op)];
}

inline const char* algoName(Algo a) {
  static const char* names[] = {"one_shot", "ring", "counts_only", "direct", "auto"};
  return names[static_cast<int>(a)];
}

}  // namespace dpcore
