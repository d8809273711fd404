// Reduce and copy loops for every dtype x op: the only place where dtype and op are dispatched.
#pragma once

#include <cstddef>

#include "dpcore/types.h"

namespace dpcore {

// out[i] = a[i] op b[i], and out2[i] = the same when out2 is not null (NCCL's "reduce, copy").
// divisor > 0 divides the result (the last reduction of an avg); float16 and bfloat16 are
// computed in float32. streamOut writes out with non-temporal stores (see copyOut).
void reduce2(DType dtype, ReduceOp op, const void* a, const void* b, void* out, void* out2,
             size_t count, int divisor, bool streamOut = false);

// memcpy, or with streamOut a copy whose stores bypass the cache: for outputs larger than the
// cache, it saves the read-for-ownership of every destination line (a third of the memory
// traffic of a copy) and leaves the cache to the FIFO slots. Call storeFence() before another
// rank or thread may read what was streamed.
void copyOut(void* dst, const void* src, size_t bytes, bool streamOut);
void storeFence();

// out[i] = inputs[0][i] op inputs[1][i] op ... in rank order, so every rank that reduces the
// same inputs gets the same bits. float16 and bfloat16 accumulate in float32 across all inputs.
void reduceMany(DType dtype, ReduceOp op, const void* const* inputs, int numInputs, void* out,
                size_t count, int divisor);

}  // namespace dpcore
