// The device transport's kernel body (csrc/cuda/reduce_copy.h) in the CPU emulation, against
// the CPU path's own loops (csrc/host/reduce.cc), bit for bit: every dtype x op, 1-4 sources
// (the ranks a verb or one_shot reads), 1-2 destinations, every offset of the buffers modulo
// 16 bytes (the packs' head and tail) and buffers that disagree modulo 16, odd counts, in
// place, avg's divisor, rounding after every op or once. Then, in the plain build, the
// emulation's interprocess events (Device::record / await), which order the ring's kernels
// between ranks with no host waiting (checkEvents). tests/test_device_kernels.py builds it
// plainly and under ThreadSanitizer and runs it; `quick` runs the sample the sanitizer can
// afford. Prints "ok: N kernels" or the first difference, and exits 1 on it.
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/device.h"
#include "host/reduce.h"

using namespace dpcore;

namespace {

constexpr DType kDTypes[] = {DType::kFloat16, DType::kBFloat16, DType::kFloat32,
                             DType::kFloat64, DType::kInt8, DType::kUInt8, DType::kInt32,
                             DType::kInt64, DType::kUInt32, DType::kUInt64};
// Moved only (types.h: dtypeReduces): copied, one source, every bit pattern as it is.
constexpr DType kMovedDTypes[] = {DType::kBool, DType::kInt16, DType::kUInt16, DType::kComplex64};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin,
                             ReduceOp::kAvg};

bool floating(DType d) { return d <= DType::kFloat64; }

// Small integers in every dtype's bits: exact in all of them, so only order and rounding matter.
void fill(std::vector<unsigned char>& bytes, DType dtype, std::mt19937& rng) {
  const size_t elem = dtypeSize(dtype), n = bytes.size() / elem;
  const bool isUnsigned = dtype == DType::kUInt8 || dtype == DType::kUInt32 ||
                          dtype == DType::kUInt64;
  std::uniform_int_distribution<int> value(isUnsigned ? 0 : -3, 3);
  for (size_t i = 0; i < n; ++i) {
    const int v = value(rng);
    unsigned char* p = bytes.data() + i * elem;
    switch (dtype) {
      case DType::kFloat16: {
        uint16_t b = Float16::store(static_cast<float>(v));
        std::memcpy(p, &b, 2);
        break;
      }
      case DType::kBFloat16: {
        uint16_t b = BFloat16Bits::store(static_cast<float>(v));
        std::memcpy(p, &b, 2);
        break;
      }
      case DType::kFloat32: { float f = v; std::memcpy(p, &f, 4); break; }
      case DType::kFloat64: { double f = v; std::memcpy(p, &f, 8); break; }
      case DType::kInt8: { int8_t x = v; std::memcpy(p, &x, 1); break; }
      case DType::kUInt8: { uint8_t x = v; std::memcpy(p, &x, 1); break; }
      case DType::kInt32: { int32_t x = v; std::memcpy(p, &x, 4); break; }
      case DType::kInt64: { int64_t x = v; std::memcpy(p, &x, 8); break; }
      case DType::kUInt32: { uint32_t x = v; std::memcpy(p, &x, 4); break; }
      case DType::kUInt64: { uint64_t x = v; std::memcpy(p, &x, 8); break; }
      case DType::kBool: case DType::kInt16: case DType::kUInt16: case DType::kComplex64:
        for (size_t b = 0; b < elem; ++b) p[b] = static_cast<unsigned char>(rng());  // any bits
        break;
    }
  }
}

// What the CPU path computes from the same sources: one reduceMany (16-bit floats round once),
// or a chain of reduce2 (they round after every op).
void reference(DType dtype, ReduceOp op, const std::vector<const void*>& srcs, void* out,
               size_t count, int divisor, bool roundEach) {
  if (!roundEach || srcs.size() < 3) {
    reduceMany(dtype, op, srcs.data(), static_cast<int>(srcs.size()), out, count, divisor);
    return;
  }
  reduce2(dtype, op, srcs[0], srcs[1], out, count, 0);
  for (size_t k = 2; k < srcs.size(); ++k) {
    reduce2(dtype, op, out, srcs[k], out, count, k + 1 == srcs.size() ? divisor : 0);
  }
}

struct Case {
  DType dtype;
  ReduceOp op;
  int sources, dests;
  size_t count;
  size_t offset;      // bytes past a 16-byte boundary, of every buffer
  bool skewed;        // the last source sits one element further: the buffers disagree mod 16
  bool inPlace;       // the first destination is the last source
  bool roundEach;
};

int failures = 0;
long kernels = 0;

void run(Device& device, const Case& c, std::mt19937& rng) {
  const size_t elem = dtypeSize(c.dtype), bytes = c.count * elem;
  const int divisor = c.op == ReduceOp::kAvg ? c.sources : 0;
  // Every buffer in its own 16-aligned block, with room for the offsets and a guard after it.
  const size_t stride = bytes + 64;
  std::vector<unsigned char> srcMem(c.sources * stride), dstMem(c.dests * stride),
      expected(bytes ? bytes : 1), guard(c.dests * stride);
  fill(srcMem, c.dtype, rng);
  fill(dstMem, c.dtype, rng);
  auto aligned = [](unsigned char* p) {
    return p + (16 - reinterpret_cast<uintptr_t>(p) % 16) % 16;
  };
  ReduceCopyArgs args;
  std::vector<const void*> srcs;
  for (int k = 0; k < c.sources; ++k) {
    size_t at = c.offset + (c.skewed && k == c.sources - 1 ? elem : 0);
    srcs.push_back(aligned(srcMem.data() + k * stride) + at);
    args.srcs[k] = srcs.back();
  }
  for (int d = 0; d < c.dests; ++d) {
    args.dsts[d] = (c.inPlace && d == 0) ? const_cast<void*>(srcs.back())
                                         : aligned(dstMem.data() + d * stride) + c.offset;
  }
  args.numSrcs = c.sources;
  args.numDsts = c.dests;
  args.count = c.count;
  args.divisor = divisor;
  args.roundEach = c.roundEach;
  reference(c.dtype, c.op, srcs, expected.data(), c.count, divisor, c.roundEach);
  guard = dstMem;
  const uint64_t ticket = device.launch(c.dtype, c.op, args);
  while (!device.done(ticket)) device.idle(ticket);  // as the transport's host waits
  ++kernels;
  for (int d = 0; d < c.dests; ++d) {
    auto out = static_cast<unsigned char*>(args.dsts[d]);
    bool same = std::memcmp(out, expected.data(), bytes) == 0;
    // nothing written past either end (the in-place destination is a source: not checked)
    if (!(c.inPlace && d == 0)) {
      unsigned char* base = dstMem.data() + d * stride;
      const size_t from = out - base, to = from + bytes;
      same = same && std::memcmp(base, guard.data() + d * stride, from) == 0 &&
             std::memcmp(base + to, guard.data() + d * stride + to, stride - to) == 0;
    }
    if (!same && failures++ < 5) {
      std::printf("DIFFERENT: %s %s sources=%d dests=%d count=%zu offset=%zu skewed=%d "
                  "inPlace=%d roundEach=%d (destination %d)\n", dtypeName(c.dtype),
                  opName(c.op), c.sources, c.dests, c.count, c.offset, c.skewed, c.inPlace,
                  c.roundEach, d);
    }
  }
}

// Two emulated devices stand in for two ranks, as the ring's neighbours: A's kernel fills a slot
// and records A's event; B's stream awaits it, B's kernel copies the slot out and records B's
// event, which A's stream awaits before it fills the slot again. The hosts queue every round at
// once and wait only for the last kernel, so only the events order the kernels (each stream
// runs its work after random delays). Either await left out copies 19-20 rounds of 20 wrong.
// Not under ThreadSanitizer: an event's counters are a shared segment that each device maps at
// an address of its own, so the sanitizer sees the release and the acquire at two addresses and
// no order between them (in the transport the two devices are two processes, which it does not
// see at all). Returns the rounds copied wrong.
int checkEvents(int rounds) {
  constexpr size_t kCount = 1001;
  auto a = makeEmulatedDevice(2, 4), b = makeEmulatedDevice(2, 4);
  b->openEvents(0, a->makeEvents(1));  // A's event 0: the slot is filled
  a->openEvents(1, b->makeEvents(1));  // B's event 0: the slot is drained
  a->unlinkShared();
  b->unlinkShared();
  std::vector<std::vector<float>> src(rounds, std::vector<float>(kCount)),
      dst(rounds, std::vector<float>(kCount));
  std::vector<float> slot(kCount);
  auto copy = [&](Device& device, const void* from, void* to) {
    ReduceCopyArgs args;
    args.srcs[0] = from;
    args.dsts[0] = to;
    args.numSrcs = args.numDsts = 1;
    args.count = kCount;
    return device.launch(DType::kFloat32, ReduceOp::kSum, args);
  };
  uint64_t lastA = 0, lastB = 0;
  for (int r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < kCount; ++i) src[r][i] = static_cast<float>(r * kCount + i);
    a->await(1, 0);
    lastA = copy(*a, src[r].data(), slot.data());
    a->record(0);
    b->await(0, 0);
    lastB = copy(*b, slot.data(), dst[r].data());
    b->record(0);
  }
  while (!a->done(lastA)) a->idle(lastA);
  while (!b->done(lastB)) b->idle(lastB);
  int wrong = 0;
  for (int r = 0; r < rounds; ++r) wrong += dst[r] != src[r];
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "quick";
  // 2 blocks of 4 threads: grid strides, several blocks' signals, and a barrier with company.
  auto device = makeEmulatedDevice(2, 4);
  std::mt19937 rng(7);
  const std::vector<size_t> counts = quick ? std::vector<size_t>{1, 37, 130}
                                           : std::vector<size_t>{0, 1, 7, 17, 37, 130, 1001};
  for (DType dtype : kDTypes) {
    const size_t elem = dtypeSize(dtype);
    for (ReduceOp op : kOps) {
      if (op == ReduceOp::kAvg && !floating(dtype)) continue;
      for (int sources = 1; sources <= 4; ++sources) {
        for (size_t count : counts) {
          for (size_t offset = 0; offset < 16; offset += elem) {
            // every offset class: aligned, one element past, 8 bytes past, one element short
            if (offset % 8 && offset != elem && offset != 16 - elem) continue;
            if (quick && offset % 8 && offset != elem) continue;
            for (int variant = 0; variant < 4; ++variant) {
              Case c{dtype, op, sources, 1 + variant % 2, count, offset,
                     variant == 2, variant == 3, sources > 2 && (variant & 1)};
              const bool sampled = variant != 1 && sources != 2 &&
                                   (sources != 4 || op == ReduceOp::kSum);
              if (quick && !sampled) continue;
              run(*device, c, rng);
            }
          }
        }
      }
    }
  }
  for (DType dtype : kMovedDTypes) {
    for (size_t count : counts) {
      for (int variant = 0; variant < 4; ++variant) {
        run(*device, Case{dtype, ReduceOp::kSum, 1, 1 + variant % 2, count, dtypeSize(dtype),
                          false, variant == 3, false}, rng);
      }
    }
  }
  if (failures) {
    std::printf("%d of %ld kernels differ from the CPU path\n", failures, kernels);
    return 1;
  }
#if defined(__SANITIZE_THREAD__)
  const int rounds = 0;
#else
  const int rounds = quick ? 20 : 100;
#endif
  if (const int wrong = rounds ? checkEvents(rounds) : 0) {
    std::printf("events: %d of %d rounds copied out of order\n", wrong, rounds);
    return 1;
  }
  std::printf("ok: %ld kernels, each bit for bit the CPU path's result; %d rounds across two "
              "devices, in the order their events give\n", kernels, rounds);
  return 0;
}
