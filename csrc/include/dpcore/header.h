// The header of one rank's call: what every rank publishes before any data moves, so that all
// can check that they entered the same collective (core/call.h) and learn what the peers need of
// each other. A transport carries the headers as they are: in a shared segment (cpu/), as bytes
// over MPI (mpi/), so the layout is fixed and trivially copyable, the same for every transport.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace dpcore {

// Room for a transport's own part of the header (its Meta); the largest, ShmMeta, takes 32.
constexpr size_t kMetaBytes = 32;

// Whether a transport's Meta fits a header as bytes: copied in and out with memcpy, so it must
// be trivially copyable, and no larger or more aligned than the room kept for it.
template <class Meta>
constexpr bool fitsHeader() {
  return std::is_trivially_copyable_v<Meta> && std::is_default_constructible_v<Meta> &&
         sizeof(Meta) <= kMetaBytes && alignof(Meta) <= 8;
}

// What one rank asked for. For all_gather, count is this rank's own shard (shards may differ),
// so peers learn every shard length from the headers, and total is the output's length; for the
// others total equals count.
struct CollHeader {
  uint64_t seq;
  int32_t coll;
  int32_t dtype;
  int32_t op;
  int32_t root;
  int32_t algo;
  int32_t chosen;  // algo kAuto: the algorithm rank 0 chose (rank 0's header is everyone's)
  uint64_t count;
  uint64_t total;
  uint64_t inAt;  // all_gather: where the shard lies inside the output (in place), or kNotInOutput
  uint64_t pieceElems;  // scatter's root, x in pieces (task.h: Pieces): each piece's elements,
                        // which every rank's out must hold; or kNotInPieces
  // The transport's facts for the peers (Transport::Meta: where this rank's data lies, ...), as
  // bytes: the header keeps one layout whatever the transport, and only the transport that put
  // them there reads them back, as its own type.
  alignas(8) unsigned char metaBytes[kMetaBytes];

  template <class Meta>
  Meta meta() const {
    static_assert(fitsHeader<Meta>(), "a transport's Meta must fit CollHeader::metaBytes");
    Meta m;
    std::memcpy(&m, metaBytes, sizeof(Meta));
    return m;
  }
  template <class Meta>
  void setMeta(const Meta& m) {
    static_assert(fitsHeader<Meta>(), "a transport's Meta must fit CollHeader::metaBytes");
    std::memcpy(metaBytes, &m, sizeof(Meta));
  }
};

static_assert(std::is_trivially_copyable_v<CollHeader> && std::is_standard_layout_v<CollHeader>,
              "headers are copied as bytes: into a shared segment, over MPI");

constexpr uint64_t kNotInOutput = ~uint64_t{0};  // CollHeader::inAt: the shard lies elsewhere
constexpr uint64_t kNotInPieces = ~uint64_t{0};  // CollHeader::pieceElems: x is one array

// The Meta of a transport whose peers need nothing beyond the call (MPI: each rank's data
// travels in messages).
struct NoMeta {};

}  // namespace dpcore
