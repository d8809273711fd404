// Plain loops that GCC vectorises at -O3 (check with -fopt-info-vec): one template per op, the
// element type's arithmetic type (float for the 16-bit floats), and no aliasing between inputs
// and outputs except exact overlap, which elementwise loops tolerate.
#include "host/reduce.h"

#include <algorithm>
#include <cstdint>

#include "host/half.h"

namespace dpcore {
namespace {

template <typename T> struct Arith { using type = T; };
template <> struct Arith<Half> { using type = float; };
template <> struct Arith<BFloat16> { using type = float; };

template <typename T> inline typename Arith<T>::type load(T x) { return x; }
inline float load(Half x) { return toFloat(x); }
inline float load(BFloat16 x) { return toFloat(x); }
template <typename T> inline T store(typename Arith<T>::type x, T) { return static_cast<T>(x); }
inline Half store(float x, Half tag) { return fromFloat(x, tag); }
inline BFloat16 store(float x, BFloat16 tag) { return fromFloat(x, tag); }

struct OpSum { template <typename A> static A apply(A a, A b) { return a + b; } };
struct OpProd { template <typename A> static A apply(A a, A b) { return a * b; } };
struct OpMax { template <typename A> static A apply(A a, A b) { return a > b ? a : b; } };
struct OpMin { template <typename A> static A apply(A a, A b) { return a < b ? a : b; } };

template <typename T, typename Op, bool kDivide>
void reduceLoop(const T* __restrict a, const T* __restrict b, T* out, size_t count, int divisor) {
  using A = typename Arith<T>::type;
  const A div = static_cast<A>(divisor);
  for (size_t i = 0; i < count; ++i) {
    A r = Op::apply(load(a[i]), load(b[i]));
    if (kDivide) r = r / div;
    out[i] = store(r, T{});
  }
}

template <typename T, typename Op>
void reduce2Typed(const void* a, const void* b, void* out, size_t count, int divisor) {
  auto pa = static_cast<const T*>(a), pb = static_cast<const T*>(b);
  auto po = static_cast<T*>(out);
  if (divisor > 0) reduceLoop<T, Op, true>(pa, pb, po, count, divisor);
  else reduceLoop<T, Op, false>(pa, pb, po, count, divisor);
}

// Accumulates block by block in the arithmetic type, so 16-bit floats round once at the end.
template <typename T, typename Op>
void reduceManyTyped(const void* const* inputs, int numInputs, void* out, size_t count,
                     int divisor) {
  using A = typename Arith<T>::type;
  constexpr size_t kBlock = 1024;
  A acc[kBlock];
  for (size_t base = 0; base < count; base += kBlock) {
    size_t len = std::min(kBlock, count - base);
    const T* first = static_cast<const T*>(inputs[0]) + base;
    for (size_t i = 0; i < len; ++i) acc[i] = load(first[i]);
    for (int k = 1; k < numInputs; ++k) {
      const T* in = static_cast<const T*>(inputs[k]) + base;
      for (size_t i = 0; i < len; ++i) acc[i] = Op::apply(acc[i], load(in[i]));
    }
    if (divisor > 0) {
      const A div = static_cast<A>(divisor);
      for (size_t i = 0; i < len; ++i) acc[i] = acc[i] / div;
    }
    T* o = static_cast<T*>(out) + base;
    for (size_t i = 0; i < len; ++i) o[i] = store(acc[i], T{});
  }
}

// The one dtype x op dispatch: calls F<T, Op>::run(args...).
template <template <typename, typename> class F, typename... Args>
void dispatch(DType dtype, ReduceOp op, Args... args) {
  auto byOp = [&](auto tag) {
    using T = decltype(tag);
    switch (op) {
      case ReduceOp::kSum: case ReduceOp::kAvg: return F<T, OpSum>::run(args...);
      case ReduceOp::kProd: return F<T, OpProd>::run(args...);
      case ReduceOp::kMax: return F<T, OpMax>::run(args...);
      case ReduceOp::kMin: return F<T, OpMin>::run(args...);
    }
  };
  switch (dtype) {
    case DType::kFloat16: return byOp(Half{});
    case DType::kBFloat16: return byOp(BFloat16{});
    case DType::kFloat32: return byOp(float{});
    case DType::kFloat64: return byOp(double{});
    case DType::kInt8: return byOp(int8_t{});
    case DType::kUInt8: return byOp(uint8_t{});
    case DType::kInt32: return byOp(int32_t{});
    case DType::kInt64: return byOp(int64_t{});
    case DType::kUInt32: return byOp(uint32_t{});
    case DType::kUInt64: return byOp(uint64_t{});
  }
}

template <typename T, typename Op> struct Reduce2 {
  static void run(const void* a, const void* b, void* out, size_t count, int div) {
    reduce2Typed<T, Op>(a, b, out, count, div);
  }
};
template <typename T, typename Op> struct ReduceMany {
  static void run(const void* const* inputs, int k, void* out, size_t count, int div) {
    reduceManyTyped<T, Op>(inputs, k, out, count, div);
  }
};

}  // namespace

void reduce2(DType dtype, ReduceOp op, const void* a, const void* b, void* out, size_t count,
             int divisor) {
  dispatch<Reduce2>(dtype, op, a, b, out, count, divisor);
}

void reduceMany(DType dtype, ReduceOp op, const void* const* inputs, int numInputs, void* out,
                size_t count, int divisor) {
  dispatch<ReduceMany>(dtype, op, inputs, numInputs, out, count, divisor);
}

}  // namespace dpcore
