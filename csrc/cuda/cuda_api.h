// The CUDA side as the rest of the module sees it: plain C++ declarations, no CUDA headers.
#pragma once

#include <cstddef>
#include <vector>

#include "algo/ring.h"
#include "algo/trace_prims.h"
#include "dpcore/types.h"

namespace dpcore {

bool cudaAvailable();  // a usable GPU right now (false without a driver or device)

// Device: out[i] = a[i] op b[i] (divisor > 0 divides), queued on `stream`; throws on launch error.
void cudaReduce2(DType dtype, ReduceOp op, const void* a, const void* b, void* out, size_t count,
                 int divisor, void* stream);

// The ring's schedule (algo/ring.h) as one GPU thread runs it against TracePrims; offsets: the
// all-gather's shards on the host (call.offsets non-null says they are used).
std::vector<VerbRecord> cudaRingTrace(RingCall call, const std::vector<size_t>& offsets);

}  // namespace dpcore
