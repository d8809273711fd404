// float16 and bfloat16 storage with float32 arithmetic. Conversions round to nearest even, as
// numpy and ml_dtypes do, so results match them bit for bit.
#pragma once

#include <cstdint>
#include <cstring>

namespace dpcore {

struct Half { uint16_t bits; };
struct BFloat16 { uint16_t bits; };

inline float toFloat(Half h) {
#if defined(__FLT16_MAX__)
  _Float16 f;
  std::memcpy(&f, &h.bits, 2);
  return static_cast<float>(f);
#else
  uint32_t sign = (h.bits & 0x8000u) << 16, exp = (h.bits >> 10) & 0x1f, man = h.bits & 0x3ffu;
  uint32_t out;
  if (exp == 0x1f) {
    out = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    out = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    out = sign;
  } else {  // subnormal: normalise
    int shift = 0;
    while (!(man & 0x400u)) { man <<= 1; ++shift; }
    out = sign | ((113 - shift) << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &out, 4);
  return f;
#endif
}

inline Half fromFloat(float f, Half) {
#if defined(__FLT16_MAX__)
  _Float16 h = static_cast<_Float16>(f);
  Half out;
  std::memcpy(&out.bits, &h, 2);
  return out;
#else
#error "float16 conversion needs _Float16 (GCC >= 12 or Clang on x86-64 / aarch64)"
#endif
}

inline float toFloat(BFloat16 b) {
  uint32_t u = static_cast<uint32_t>(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline BFloat16 fromFloat(float f, BFloat16) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return BFloat16{static_cast<uint16_t>((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return BFloat16{static_cast<uint16_t>(u >> 16)};
}

}  // namespace dpcore
