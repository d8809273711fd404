// Reduce and copy loops for every dtype x op: the only place where dtype and op are dispatched.
#pragma once

#include <cstddef>
#include <cstring>

#include "dpcore/types.h"
#include "host/stream_copy.h"

namespace dpcore {

// out[i] = a[i] op b[i]. divisor > 0 divides the result (the last reduction of an avg);
// float16 and bfloat16 are computed in float32. Ordinary stores: streaming ones made the ring
// slower (benchmarks/results/2026-11-29-cpu.md).
void reduce2(DType dtype, ReduceOp op, const void* a, const void* b, void* out, size_t count,
             int divisor);

// out[i] = inputs[0][i] op inputs[1][i] op ... in rank order, so every rank that reduces the
// same inputs gets the same bits. float16 and bfloat16 accumulate in float32 across all inputs.
void reduceMany(DType dtype, ReduceOp op, const void* const* inputs, int numInputs, void* out,
                size_t count, int divisor);

// The loops of host memory, as the algorithms take them from a memory interface
// (algo/one_shot.h, algo/direct.h), so that device memory can bring its own.
struct HostLoops {
  static void reduce2(DType dtype, ReduceOp op, const void* a, const void* b, void* out,
                      size_t count, int divisor) {
    dpcore::reduce2(dtype, op, a, b, out, count, divisor);
  }
  static void reduceMany(DType dtype, ReduceOp op, const void* const* inputs, int numInputs,
                         void* out, size_t count, int divisor) {
    dpcore::reduceMany(dtype, op, inputs, numInputs, out, count, divisor);
  }
  static void copy(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
  static void copyToOutput(void* dst, const void* src, size_t bytes, bool stream) {
    dpcore::copyToOutput(dst, src, bytes, stream);
  }
  static bool streams(size_t outputBytes) { return outputBytes >= streamMinBytes(); }
};

}  // namespace dpcore
