// Elementwise reduce kernels for every dtype x op, the device twin of cpu/reduce.cc: 16-bit
// floats are computed in float32, avg divides where a chunk's reduction completes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda/cuda_api.h"

namespace dpcore {
namespace {

template <typename T> struct Arith { using type = T; };
template <> struct Arith<__half> { using type = float; };
template <> struct Arith<__nv_bfloat16> { using type = float; };

template <typename T> __device__ inline typename Arith<T>::type load(T x) { return x; }
__device__ inline float load(__half x) { return __half2float(x); }
__device__ inline float load(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ inline T store(typename Arith<T>::type x, T*) {
  return static_cast<T>(x);
}
__device__ inline __half store(float x, __half*) { return __float2half_rn(x); }
__device__ inline __nv_bfloat16 store(float x, __nv_bfloat16*) { return __float2bfloat16_rn(x); }

struct OpSum { template <typename A> __device__ static A apply(A a, A b) { return a + b; } };
struct OpProd { template <typename A> __device__ static A apply(A a, A b) { return a * b; } };
struct OpMax { template <typename A> __device__ static A apply(A a, A b) { return a > b ? a : b; } };
struct OpMin { template <typename A> __device__ static A apply(A a, A b) { return a < b ? a : b; } };

template <typename T, typename Op>
__global__ void reduceKernel(const T* __restrict__ a, const T* __restrict__ b, T* out,
                             size_t count, int divisor) {
  using A = typename Arith<T>::type;
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += stride) {
    A r = Op::apply(load(a[i]), load(b[i]));
    if (divisor > 0) r = r / static_cast<A>(divisor);
    out[i] = store(r, static_cast<T*>(nullptr));
  }
}

template <typename T, typename Op>
void launch(const void* a, const void* b, void* out, size_t count, int divisor,
            cudaStream_t stream) {
  constexpr int kThreads = 256;
  size_t blocks = (count + kThreads - 1) / kThreads;
  if (blocks > 4096) blocks = 4096;  // grid-stride loop covers the rest
  if (blocks == 0) return;
  reduceKernel<T, Op><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), count, divisor);
}

template <typename T>
void byOp(ReduceOp op, const void* a, const void* b, void* out, size_t count, int divisor,
          cudaStream_t stream) {
  switch (op) {
    case ReduceOp::kSum: case ReduceOp::kAvg:
      return launch<T, OpSum>(a, b, out, count, divisor, stream);
    case ReduceOp::kProd: return launch<T, OpProd>(a, b, out, count, divisor, stream);
    case ReduceOp::kMax: return launch<T, OpMax>(a, b, out, count, divisor, stream);
    case ReduceOp::kMin: return launch<T, OpMin>(a, b, out, count, divisor, stream);
  }
}

}  // namespace

void cudaReduce2(DType dtype, ReduceOp op, const void* a, const void* b, void* out, size_t count,
                 int divisor, void* streamPtr) {
  auto stream = static_cast<cudaStream_t>(streamPtr);
  switch (dtype) {
    case DType::kFloat16: byOp<__half>(op, a, b, out, count, divisor, stream); break;
    case DType::kBFloat16: byOp<__nv_bfloat16>(op, a, b, out, count, divisor, stream); break;
    case DType::kFloat32: byOp<float>(op, a, b, out, count, divisor, stream); break;
    case DType::kFloat64: byOp<double>(op, a, b, out, count, divisor, stream); break;
    case DType::kInt8: byOp<int8_t>(op, a, b, out, count, divisor, stream); break;
    case DType::kUInt8: byOp<uint8_t>(op, a, b, out, count, divisor, stream); break;
    case DType::kInt32: byOp<int32_t>(op, a, b, out, count, divisor, stream); break;
    case DType::kInt64: byOp<int64_t>(op, a, b, out, count, divisor, stream); break;
  }
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string("dpcore cuda reduce: ") + cudaGetErrorString(err));
  }
}

}  // namespace dpcore
