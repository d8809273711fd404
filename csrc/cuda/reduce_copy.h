// reduceCopy: the one kernel body every verb of the device transport runs. It reads up to
// kMaxSources buffers (local, or a peer's through its IPC mapping), reduces them elementwise in
// order, and writes the result to up to kMaxDests buffers, so a fused verb such as
// recvReduceCopySend (reduce the slot that arrived with our input, keep the sum, push it into the
// next rank's slot) is one kernel, not three.
//
//   out = ((src0 op src1) op src2) ...     then / divisor where the reduction ends (avg)
//
// 16-bit floats are computed in float32; roundEach rounds after every op, as a chain of two-input
// reductions does (the ring, direct), and without it they round once at the end, as one_shot's
// reduceMany does on the CPU: both give the CPU path's bits.
//
// Memory moves in 16-byte packs where every pointer has the same offset modulo 16 (CuPy's
// allocations are 256-byte aligned, so all but odd views): the few elements before the first
// aligned address (the head) and after the last whole pack (the tail) go one by one. Buffers
// that disagree modulo 16 go element by element. A copy (one source) has a body of its own,
// copyPacked, and its own kernel. Host and device code: nvcc builds it for the GPU
// (cuda/cuda_device.cu), g++ for the emulation (cuda/emulated_device.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/device_layer.h"
#include "dpcore/types.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#else
#include "host/half.h"
#endif

namespace dpcore {

constexpr int kMaxSources = 16;  // one_shot reads every rank of a node in one kernel
constexpr int kMaxDests = kMaxSources;  // direct's all_reduce writes into every rank's output

struct ReduceCopyArgs {
  const void* srcs[kMaxSources] = {};
  void* dsts[kMaxDests] = {};
  int numSrcs = 0;
  int numDsts = 0;
  size_t count = 0;        // elements
  int divisor = 0;         // > 0: divide the result (the last reduction of an avg)
  bool roundEach = false;  // 16-bit floats: round after every op
  // The kernel's end (device_layer.h): each block counts itself in `arrivals` (device
  // memory), and the last one to arrive stores `ticket` into `done` (memory the host reads).
  uint64_t* arrivals = nullptr;
  uint64_t* done = nullptr;
  uint64_t ticket = 0;
};

// -- element types: storage bits and arithmetic ---------------------------------------------

// kDivides: avg runs on floating types only, so integer kernels carry no division (a 64-bit
// one is a call with a stack frame on the GPU).
template <class T>
struct Plain {
  using Bits = T;
  using Arith = T;
  static constexpr bool kDivides = static_cast<T>(0.5) != 0;
  DP_HOST_DEVICE static Arith load(Bits x) { return x; }
  DP_HOST_DEVICE static Bits store(Arith x) { return x; }
};

struct Float16 {
  using Bits = uint16_t;
  using Arith = float;
  static constexpr bool kDivides = true;
#if defined(__CUDACC__)
  __device__ static float load(Bits x) { return __half2float(__ushort_as_half(x)); }
  __device__ static Bits store(float x) { return __half_as_ushort(__float2half_rn(x)); }
#else
  static float load(Bits x) { return toFloat(Half{x}); }
  static Bits store(float x) { return fromFloat(x, Half{}).bits; }
#endif
};

struct BFloat16Bits {
  using Bits = uint16_t;
  using Arith = float;
  static constexpr bool kDivides = true;
#if defined(__CUDACC__)
  __device__ static float load(Bits x) { return __bfloat162float(__ushort_as_bfloat16(x)); }
  __device__ static Bits store(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
#else
  static float load(Bits x) { return toFloat(BFloat16{x}); }
  static Bits store(float x) { return fromFloat(x, BFloat16{}).bits; }
#endif
};

// The ops of host/reduce.cc, with the result cast back to the arithmetic type (int8 + int8 is an
// int in C++; the CPU loops store it back into int8 as well).
struct OpSum {
  template <class A> DP_HOST_DEVICE static A apply(A a, A b) { return static_cast<A>(a + b); }
};
struct OpProd {
  template <class A> DP_HOST_DEVICE static A apply(A a, A b) { return static_cast<A>(a * b); }
};
struct OpMax {
  template <class A> DP_HOST_DEVICE static A apply(A a, A b) { return a > b ? a : b; }
};
struct OpMin {
  template <class A> DP_HOST_DEVICE static A apply(A a, A b) { return a < b ? a : b; }
};

// Calls f(Element{}, Op{}) for a dtype and op: the one place they are dispatched.
template <class F>
void dispatchReduceCopy(DType dtype, ReduceOp op, F&& f) {
  auto byOp = [&](auto element) {
    switch (op) {
      case ReduceOp::kSum: case ReduceOp::kAvg: return f(element, OpSum{});
      case ReduceOp::kProd: return f(element, OpProd{});
      case ReduceOp::kMax: return f(element, OpMax{});
      case ReduceOp::kMin: return f(element, OpMin{});
    }
  };
  switch (dtype) {
    case DType::kFloat16: return byOp(Float16{});
    case DType::kBFloat16: return byOp(BFloat16Bits{});
    case DType::kFloat32: return byOp(Plain<float>{});
    case DType::kFloat64: return byOp(Plain<double>{});
    case DType::kInt8: return byOp(Plain<int8_t>{});
    case DType::kUInt8: return byOp(Plain<uint8_t>{});
    case DType::kInt32: return byOp(Plain<int32_t>{});
    case DType::kInt64: return byOp(Plain<int64_t>{});
    case DType::kUInt32: return byOp(Plain<uint32_t>{});
    case DType::kUInt64: return byOp(Plain<uint64_t>{});
    // moved only: a copy, one source, as it is (dtypeReduces)
    case DType::kBool: return f(Plain<uint8_t>{}, OpSum{});
    case DType::kInt16: case DType::kUInt16: return f(Plain<uint16_t>{}, OpSum{});
    case DType::kComplex64: return f(Plain<uint64_t>{}, OpSum{});
  }
}

// -- the body ---------------------------------------------------------------------------------

#if defined(__CUDACC__)
using Pack16 = uint4;  // one 128-bit load or store
#else
struct alignas(16) Pack16 { uint32_t x, y, z, w; };
#endif

template <class E>
union PackOf {
  static constexpr int kElems = 16 / sizeof(typename E::Bits);
  Pack16 pack;
  typename E::Bits elems[kElems];
};

// One element's value: the sources reduced in order, then divided.
template <class E, class Op>
DP_DEVICE DP_FORCE_INLINE typename E::Bits reduceOne(const ReduceCopyArgs& a, size_t i) {
  using A = typename E::Arith;
  A acc = E::load(static_cast<const typename E::Bits*>(a.srcs[0])[i]);
  for (int k = 1; k < a.numSrcs; ++k) {
    acc = Op::apply(acc, E::load(static_cast<const typename E::Bits*>(a.srcs[k])[i]));
    if (a.roundEach && k + 1 < a.numSrcs) acc = E::load(E::store(acc));
  }
  if (E::kDivides && a.divisor > 0) acc = acc / static_cast<A>(a.divisor);
  return E::store(acc);
}

template <class E, class Op>
DP_DEVICE DP_FORCE_INLINE void reduceCopyElements(const ReduceCopyArgs& a, size_t begin,
                                                  size_t end, size_t first, size_t stride) {
  using Bits = typename E::Bits;
  for (size_t i = begin + first; i < end; i += stride) {
    const Bits v = reduceOne<E, Op>(a, i);
    for (int d = 0; d < a.numDsts; ++d) static_cast<Bits*>(a.dsts[d])[i] = v;
  }
}

// kUnroll packs a whole grid stride apart, from pack p: all loads in flight before any
// arithmetic, and a warp's loads contiguous.
template <class E, class Op, int kUnroll>
DP_DEVICE DP_FORCE_INLINE void reduceCopyStep(const ReduceCopyArgs& a, size_t base, size_t p,
                                              size_t stride) {
  using A = typename E::Arith;
  using P = PackOf<E>;
  constexpr int kElems = P::kElems;
  auto at = [&](const void* buffer, int u) {
    return reinterpret_cast<const Pack16*>(static_cast<const char*>(buffer) +
                                           base * sizeof(typename E::Bits)) + p + u * stride;
  };
  A acc[kUnroll][kElems];
  DP_UNROLL
  for (int u = 0; u < kUnroll; ++u) {
    P in;
    in.pack = *at(a.srcs[0], u);
    DP_UNROLL
    for (int e = 0; e < kElems; ++e) acc[u][e] = E::load(in.elems[e]);
  }
  for (int k = 1; k < a.numSrcs; ++k) {
    const bool round = a.roundEach && k + 1 < a.numSrcs;
    P in[kUnroll];
    DP_UNROLL
    for (int u = 0; u < kUnroll; ++u) in[u].pack = *at(a.srcs[k], u);
    DP_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      DP_UNROLL
      for (int e = 0; e < kElems; ++e) {
        acc[u][e] = Op::apply(acc[u][e], E::load(in[u].elems[e]));
        if (round) acc[u][e] = E::load(E::store(acc[u][e]));
      }
    }
  }
  DP_UNROLL
  for (int u = 0; u < kUnroll; ++u) {
    P out;
    DP_UNROLL
    for (int e = 0; e < kElems; ++e) {
      A v = acc[u][e];
      if (E::kDivides && a.divisor > 0) v = v / static_cast<A>(a.divisor);
      out.elems[e] = E::store(v);
    }
    for (int d = 0; d < a.numDsts; ++d) *const_cast<Pack16*>(at(a.dsts[d], u)) = out.pack;
  }
}

// Packs [0, packs) from element `base`: this thread's packs first, first + stride, ..., taken
// kUnroll at a time while they last, then one at a time.
template <class E, class Op>
DP_DEVICE DP_FORCE_INLINE void reduceCopyPacks(const ReduceCopyArgs& a, size_t base, size_t packs,
                                               size_t first, size_t stride) {
  constexpr int kUnroll = 2;
  size_t p = first;
  for (; p + (kUnroll - 1) * stride < packs; p += kUnroll * stride) {
    reduceCopyStep<E, Op, kUnroll>(a, base, p, stride);
  }
  for (; p < packs; p += stride) reduceCopyStep<E, Op, 1>(a, base, p, stride);
}

// Where the packs start: the elements before every pointer's next 16-byte boundary, or
// `count` when the pointers disagree modulo 16 (then every element goes alone).
inline DP_HOST_DEVICE size_t packHead(const ReduceCopyArgs& a, size_t elemSize) {
  const uintptr_t offset = reinterpret_cast<uintptr_t>(a.srcs[0]) % 16;
  for (int k = 1; k < a.numSrcs; ++k) {
    if (reinterpret_cast<uintptr_t>(a.srcs[k]) % 16 != offset) return a.count;
  }
  for (int d = 0; d < a.numDsts; ++d) {
    if (reinterpret_cast<uintptr_t>(a.dsts[d]) % 16 != offset) return a.count;
  }
  if (offset % elemSize) return a.count;
  const size_t head = offset ? (16 - offset) / elemSize : 0;
  return head < a.count ? head : a.count;
}

// A copy: one source and no division (op and rounding never apply to one value). It moves the
// source's packs as they are, never unpacking an element, so its kernel needs few registers
// (reduceCopy unpacks every element: a byte copy there takes 74-76, and so 3 blocks per
// multiprocessor where 4 were launched).
inline DP_HOST_DEVICE bool copiesOnly(const ReduceCopyArgs& a) {
  return a.numSrcs == 1 && a.divisor == 0;
}

// Bytes [begin, end) one by one: a copy's head and tail.
DP_DEVICE DP_FORCE_INLINE void copyBytes(const ReduceCopyArgs& a, size_t begin, size_t end,
                                         size_t first, size_t stride) {
  const auto* src = static_cast<const unsigned char*>(a.srcs[0]);
  for (size_t i = begin + first; i < end; i += stride) {
    for (int d = 0; d < a.numDsts; ++d) static_cast<unsigned char*>(a.dsts[d])[i] = src[i];
  }
}

// The packs of a copy (copiesOnly) where reduceCopy would move them, so that both count alike
// (packHead): kUnroll loads in flight, then their stores.
template <class Thread>
DP_DEVICE void copyPacked(const Thread& t, const ReduceCopyArgs& a, size_t elemSize) {
  constexpr int kUnroll = 4;
  const size_t first = static_cast<size_t>(t.block()) * t.threads() + t.thread();
  const size_t stride = static_cast<size_t>(t.blocks()) * t.threads();
  const size_t head = packHead(a, elemSize) * elemSize, bytes = a.count * elemSize;
  const size_t packs = (bytes - head) / 16, tail = head + packs * 16;
  const auto* src = reinterpret_cast<const Pack16*>(static_cast<const char*>(a.srcs[0]) + head);
  auto dst = [&](int d) {
    return reinterpret_cast<Pack16*>(static_cast<char*>(a.dsts[d]) + head);
  };
  copyBytes(a, 0, head, first, stride);
  size_t p = first;
  for (; p + (kUnroll - 1) * stride < packs; p += kUnroll * stride) {
    Pack16 v[kUnroll];
    DP_UNROLL
    for (int u = 0; u < kUnroll; ++u) v[u] = src[p + u * stride];
    for (int d = 0; d < a.numDsts; ++d) {
      DP_UNROLL
      for (int u = 0; u < kUnroll; ++u) dst(d)[p + u * stride] = v[u];
    }
  }
  for (; p < packs; p += stride) {
    const Pack16 v = src[p];
    for (int d = 0; d < a.numDsts; ++d) dst(d)[p] = v;
  }
  copyBytes(a, tail, bytes, first, stride);
  signalDone(t, a.arrivals, a.done, a.ticket);
}

template <class E, class Op, class Thread>
DP_DEVICE void reduceCopy(const Thread& t, const ReduceCopyArgs& a) {
  constexpr size_t kElems = PackOf<E>::kElems;
  const size_t first = static_cast<size_t>(t.block()) * t.threads() + t.thread();
  const size_t stride = static_cast<size_t>(t.blocks()) * t.threads();
  const size_t head = packHead(a, sizeof(typename E::Bits));
  const size_t packs = (a.count - head) / kElems;
  const size_t tail = head + packs * kElems;
  reduceCopyElements<E, Op>(a, 0, head, first, stride);
  reduceCopyPacks<E, Op>(a, head, packs, first, stride);
  reduceCopyElements<E, Op>(a, tail, a.count, first, stride);
  signalDone(t, a.arrivals, a.done, a.ticket);
}

}  // namespace dpcore
