// Reduce and copy loops for every dtype x op: the only place where dtype and op are dispatched.
#pragma once

#include <cstddef>

#include "dpcore/types.h"

namespace dpcore {

// out[i] = a[i] op b[i]. divisor > 0 divides the result (the last reduction of an avg);
// float16 and bfloat16 are computed in float32.
//
// Outputs are written with ordinary stores. Non-temporal (cache-bypassing) stores for large
// outputs were tried: on this project's 2-core machine they made a 2-rank all-reduce of
// 4-256 MiB slower (2-3 GB/s busbw against 6-12 GB/s), so they are gone.
void reduce2(DType dtype, ReduceOp op, const void* a, const void* b, void* out, size_t count,
             int divisor);

// out[i] = inputs[0][i] op inputs[1][i] op ... in rank order, so every rank that reduces the
// same inputs gets the same bits. float16 and bfloat16 accumulate in float32 across all inputs.
void reduceMany(DType dtype, ReduceOp op, const void* const* inputs, int numInputs, void* out,
                size_t count, int divisor);

}  // namespace dpcore
