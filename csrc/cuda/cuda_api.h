// The CUDA side as the rest of the module sees it: plain C++ declarations, no CUDA headers.
#pragma once

#include <cstddef>

#include "dpcore/types.h"

namespace dpcore {

bool cudaAvailable();  // a usable GPU right now (false without a driver or device)

// Device: out[i] = a[i] op b[i] (divisor > 0 divides), queued on `stream`; throws on launch error.
void cudaReduce2(DType dtype, ReduceOp op, const void* a, const void* b, void* out, size_t count,
                 int divisor, void* stream);

}  // namespace dpcore
