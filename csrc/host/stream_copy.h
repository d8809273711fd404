// A copy whose stores bypass the cache (non-temporal stores), for destinations too large to stay
// in it. An ordinary copy reads each line of the destination before it overwrites it, so past
// the cache it moves 3 bytes for every 2 it copies; this one moves 2. glibc's memcpy streams
// too, but only past 3/4 of the last-level cache that cpuid reports, which on a VM can be the
// host's, many times what its cores share. Streaming is slower where the destination would have
// stayed in cache, hence the threshold below (measurements: benchmarks/results/2026-12-01-cpu.md,
// "Night").
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace dpcore {

inline void streamCopy(void* dstv, const void* srcv, size_t bytes) {
  auto dst = static_cast<char*>(dstv);
  auto src = static_cast<const char*>(srcv);
#if defined(__AVX512F__) || defined(__AVX2__) || defined(__SSE2__)
#if defined(__AVX512F__)
  constexpr size_t kVec = 64;
#elif defined(__AVX2__)
  constexpr size_t kVec = 32;
#else
  constexpr size_t kVec = 16;
#endif
  // streaming stores need aligned destinations: copy up to the first boundary plainly
  size_t head = (kVec - reinterpret_cast<uintptr_t>(dst) % kVec) % kVec;
  if (head > bytes) head = bytes;
  std::memcpy(dst, src, head);
  dst += head, src += head, bytes -= head;
  const size_t body = bytes - bytes % kVec;
  for (size_t i = 0; i < body; i += kVec) {
#if defined(__AVX512F__)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i), _mm512_loadu_si512(src + i));
#elif defined(__AVX2__)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
#else
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
#endif
  }
  _mm_sfence();  // streaming stores are weakly ordered: finish them before anyone is told
  dst += body, src += body, bytes -= body;
#endif
  std::memcpy(dst, src, bytes);
}

// A copy into a collective's output: streamed where the caller decided it is too large for the
// cache (streamMinBytes), else memcpy.
inline void copyToOutput(void* dst, const void* src, size_t bytes, bool stream) {
  if (stream) streamCopy(dst, src, bytes);
  else std::memcpy(dst, src, bytes);
}

// The largest cache the kernel lists for CPU 0 (sysfs), or 32 MiB where it lists none.
inline size_t lastLevelCacheBytes() {
  static const size_t bytes = [] {
    size_t largest = 0;
    for (int i = 0; i < 8; ++i) {
      std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
      std::string text;
      if (!(f >> text)) break;
      size_t value = std::stoull(text);  // "32768K"
      if (text.back() == 'K') value <<= 10;
      if (text.back() == 'M') value <<= 20;
      largest = value > largest ? value : largest;
    }
    return largest ? largest : size_t{32} << 20;
  }();
  return bytes;
}

// Outputs from this size up are written with streamCopy where they can be: half the last-level
// cache, which two ranks that share it fill at that size.
inline size_t streamMinBytes() { return lastLevelCacheBytes() / 2; }

}  // namespace dpcore
