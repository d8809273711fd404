// The contracts between the layers, in code: what a transport gives core/collectives.h (a
// Transport), what the algorithms need of the objects it hands them (Prims for algo/ring.h,
// Payloads for algo/one_shot.h, PeerMemory for algo/direct.h), and what Queued<Engine> drives
// (core/backend.h: Collectives<T>, mpi/hierarchical.h). Every member is one static_assert, whose
// message is its signature and what it is for: a type that misses one fails to compile with
// that message, instead of deep inside an algorithm. Collectives<T> and Queued<Engine> check
// their parameter; each transport's .cc checks itself too, so its own file names what it lacks.
//
// Only the members' presence and result types are checked (C++17's detection idiom), not what
// they do: tests/transport_configs.py runs every collective on every transport for that.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "algo/direct.h"
#include "algo/exchange.h"
#include "algo/ring.h"
#include "core/call.h"
#include "core/trace.h"
#include "dpcore/header.h"
#include "dpcore/task.h"
#include "dpcore/types.h"

namespace dpcore {
namespace contract {

// has<Op, T>: whether Op<T>, an expression's type, compiles. gives<Op, T, R>: ... and converts
// to R.
template <class, template <class> class Op, class T>
struct Detect : std::false_type {};
template <template <class> class Op, class T>
struct Detect<std::void_t<Op<T>>, Op, T> : std::true_type {};
template <template <class> class Op, class T>
constexpr bool has = Detect<void, Op, T>::value;
template <template <class> class Op, class T, class R>
constexpr bool gives() {
  if constexpr (has<Op, T>) return std::is_convertible_v<Op<T>, R>;
  else return false;
}
// T::kPeerMemory and M::kMapped, as `if constexpr` needs them: compile-time bools.
template <class T> using PeerMemoryFlag = std::integral_constant<bool, T::kPeerMemory>;
template <class M> using MappedFlag = std::integral_constant<bool, M::kMapped>;
template <class M> using WritesFlag = std::integral_constant<bool, M::kWritesOutputs>;
template <class T>
constexpr bool peerMemoryOn() {
  if constexpr (has<PeerMemoryFlag, T>) return T::kPeerMemory;
  else return false;
}
template <class M>
constexpr bool mappedOn() {
  if constexpr (has<MappedFlag, M>) return M::kMapped;
  else return false;
}
template <class M>
constexpr bool writesOn() {
  if constexpr (has<WritesFlag, M>) return M::kWritesOutputs;
  else return false;
}

// Arguments of the calls below, of the types their callers pass; declared only, since decltype
// never evaluates them.
namespace arg {
extern const void* src;
extern void* dst;
extern void* const* outputs;
extern const void* const* inputs;
extern size_t count;  // elements
extern size_t bytes;
extern size_t offset;  // bytes into a peer's buffer
extern int rank;
extern int divisor;
extern bool stream;
extern double seconds;
extern DType dtype;
extern ReduceOp op;
extern DirectStage stage;
extern const Task task;
extern const RingCall ring;
extern const CollHeader header;
extern const std::vector<CollHeader> headers;
extern const CallContext call;
extern const std::string text;
extern const ExchangePlan plan;
}  // namespace arg

template <class T>
T& a();  // an lvalue of T, for the same use

// -- Prims: the ring's verbs (algo/ring.h) on one segment of `count` elements ------------------
template <class P> using Send = decltype(a<P>().send(arg::src, arg::count));
template <class P> using Recv = decltype(a<P>().recv(arg::dst, arg::count));
template <class P> using RecvReduceSend = decltype(a<P>().recvReduceSend(arg::src, arg::count));
template <class P>
using RecvReduceCopySend = decltype(a<P>().recvReduceCopySend(arg::src, arg::dst, arg::count));
template <class P>
using RecvReduceCopy = decltype(a<P>().recvReduceCopy(arg::src, arg::dst, arg::count));
template <class P> using RecvCopySend = decltype(a<P>().recvCopySend(arg::dst, arg::count));
template <class P> using CopySend = decltype(a<P>().copySend(arg::src, arg::dst, arg::count));
template <class P> using Finish = decltype(a<P>().finish());

template <class P>
constexpr bool isPrims() {
  static_assert(has<Send, P>, "Prims: send(const void* src, size_t count): push a segment to "
                              "the next rank");
  static_assert(has<Recv, P>, "Prims: recv(void* dst, size_t count): take a segment from the "
                              "previous rank into dst");
  static_assert(has<RecvReduceSend, P>, "Prims: recvReduceSend(const void* src, size_t count): "
                                        "take, reduce with src, push on");
  static_assert(has<RecvReduceCopySend, P>, "Prims: recvReduceCopySend(const void* src, void* "
                                            "dst, size_t count): take, reduce, keep, push on");
  static_assert(has<RecvReduceCopy, P>, "Prims: recvReduceCopy(const void* src, void* dst, "
                                        "size_t count): take, reduce with src, keep in dst");
  static_assert(has<RecvCopySend, P>, "Prims: recvCopySend(void* dst, size_t count): take, keep "
                                      "in dst, push on");
  static_assert(has<CopySend, P>, "Prims: copySend(const void* src, void* dst, size_t count): "
                                  "keep src in dst, push on");
  static_assert(has<Finish, P>, "Prims: finish(): after the ring's last verb, before the call "
                                "returns (sends still in flight end here)");
  return true;
}

// -- Payloads: every rank's published input, for one-shot (algo/one_shot.h) -------------------
template <class P> using Payload = decltype(a<P>().payload(arg::rank));
template <class P>
using ReduceMany = decltype(a<P>().reduceMany(arg::dtype, arg::op, arg::inputs, arg::rank,
                                              arg::dst, arg::count, arg::divisor));
template <class P> using Copy = decltype(a<P>().copy(arg::dst, arg::src, arg::bytes));

template <class P>
constexpr bool isPayloads() {
  static_assert(gives<Payload, P, const char*>(), "Payloads: const char* payload(int r): rank "
                                                  "r's published input, readable here");
  static_assert(has<ReduceMany, P>, "Payloads: reduceMany(DType, ReduceOp, const void* const* "
                                    "inputs, int n, void* out, size_t count, int divisor): out = "
                                    "the inputs reduced in order, rounding once");
  static_assert(has<Copy, P>, "Payloads: copy(void* dst, const void* src, size_t bytes): in "
                              "the payloads' memory");
  return true;
}

// -- PeerMemory: the peers' buffers, for direct (algo/direct.h) -------------------------------
template <class M>
using ReadInput = decltype(a<M>().readInput(arg::rank, arg::offset, arg::dst, arg::bytes,
                                            arg::stream));
template <class M>
using ReadOutput = decltype(a<M>().readOutput(arg::rank, arg::offset, arg::dst, arg::bytes,
                                              arg::stream));
template <class M> using Signal = decltype(a<M>().signal(arg::stage));
template <class M> using WaitAll = decltype(a<M>().waitAll(arg::stage));
template <class M> using Streams = decltype(a<M>().streams(arg::bytes));
template <class M>
using CopyToOutput = decltype(a<M>().copyToOutput(arg::dst, arg::src, arg::bytes, arg::stream));
template <class M> using Scratch = decltype(a<M>().scratch(arg::rank));
template <class M>
using Reduce2 = decltype(a<M>().reduce2(arg::dtype, arg::op, arg::src, arg::src, arg::dst,
                                        arg::count, arg::divisor));
template <class M> using Input = decltype(a<M>().input(arg::rank, arg::offset));
template <class M>
using ReduceInOrder = decltype(a<M>().reduceInOrder(arg::dtype, arg::op, arg::inputs, arg::rank,
                                                    arg::outputs, arg::rank, arg::count,
                                                    arg::divisor));
template <class M> using Output = decltype(a<M>().output(arg::rank, arg::offset));
template <class M>
using WriteOutput = decltype(a<M>().writeOutput(arg::rank, arg::offset, arg::src, arg::bytes,
                                                arg::stream));

template <class M>
constexpr bool isPeerMemory() {
  static_assert(has<MappedFlag, M>, "PeerMemory: static constexpr bool kMapped: whether every "
                                  "peer's memory is addressable here");
  static_assert(has<ReadInput, M>, "PeerMemory: readInput(int peer, size_t offset, void* dst, "
                                   "size_t bytes, bool stream): bytes of a peer's input");
  static_assert(has<ReadOutput, M>, "PeerMemory: readOutput(int peer, size_t offset, void* dst, "
                                    "size_t bytes, bool stream): bytes of a peer's output");
  static_assert(has<Signal, M>, "PeerMemory: signal(DirectStage): tell the peers this rank "
                                "passed the stage");
  static_assert(has<WaitAll, M>, "PeerMemory: waitAll(DirectStage): wait until every rank has");
  static_assert(gives<Streams, M, bool>(), "PeerMemory: bool streams(size_t bytes): whether an "
                                           "output this large is written past the cache");
  static_assert(has<CopyToOutput, M>, "PeerMemory: copyToOutput(void* dst, const void* src, "
                                      "size_t bytes, bool stream): this rank's own part");
  static_assert(has<WritesFlag, M>, "PeerMemory: static constexpr bool kWritesOutputs: whether "
                                  "this rank may write the peers' outputs (writeOutput)");
  if constexpr (writesOn<M>()) {
    static_assert(has<WriteOutput, M>, "PeerMemory, kWritesOutputs: writeOutput(int peer, size_t "
                                       "offset, const void* src, size_t bytes, bool stream): "
                                       "bytes into a peer's output");
  }
  if constexpr (mappedOn<M>()) {
    static_assert(gives<Input, M, const void*>(), "PeerMemory, kMapped: input(int peer, size_t "
                                                  "offset): a peer's input, addressable here");
    static_assert(gives<Output, M, void*>(), "PeerMemory, kMapped: output(int peer, size_t "
                                             "offset): a peer's output, addressable here");
    static_assert(has<ReduceInOrder, M>, "PeerMemory, kMapped: reduceInOrder(DType, ReduceOp, "
                                         "const void* const* inputs, int n, void* const* "
                                         "outputs, int m, size_t count, int divisor): rounding "
                                         "after every op, into every output");
  } else {
    static_assert(gives<Scratch, M, char*>(), "PeerMemory: char* scratch(int i): two local "
                                              "pieces of kDirectPieceBytes (i = 0, 1)");
    static_assert(has<Reduce2, M>, "PeerMemory: reduce2(DType, ReduceOp, const void* a, const "
                                   "void* b, void* out, size_t count, int divisor)");
  }
  return true;
}

// -- Messages: a transfer a message, for exchangeOverMessages (algo/exchange.h) --------------
template <class M> using MsgRecv = decltype(a<M>().recv(arg::rank, arg::dst, arg::bytes));
template <class M> using MsgSend = decltype(a<M>().send(arg::rank, arg::src, arg::bytes));
template <class M> using MsgWait = decltype(a<M>().wait());

template <class M>
constexpr bool isMessages() {
  static_assert(has<MsgRecv, M>, "Messages: recv(int from, void* dst, size_t bytes): post the "
                                 "receive of a transfer");
  static_assert(has<MsgSend, M>, "Messages: send(int to, const void* src, size_t bytes): post "
                                 "the send of a transfer");
  static_assert(has<Copy, M>, "Messages: copy(void* dst, const void* src, size_t bytes): this "
                              "rank's own part");
  static_assert(has<MsgWait, M>, "Messages: wait(): until every posted message is done");
  return true;
}

// -- Transport: one collective at a time, as core/collectives.h drives it ----------------------
template <class T> using Meta = typename T::Meta;
template <class T> using Rank = decltype(a<const T>().rank());
template <class T> using Size = decltype(a<const T>().size());
template <class T> using Name = decltype(a<const T>().name(arg::rank));
template <class T> using Validate = decltype(a<T>().validate(arg::task));
template <class T> using Annotate = decltype(a<const T>().annotate(arg::task));
template <class T> using SharedInput = decltype(a<T>().sharedInput(a<const Meta<T>>()));
template <class T> using Begin = decltype(a<T>().begin(arg::call));
template <class T> using Exchange = decltype(a<T>().exchange(arg::task, arg::header));
template <class T> using SegmentBytes = decltype(a<T>().segmentBytes());
template <class T> using CopyAlone = decltype(a<T>().copyAlone(arg::dst, arg::src, arg::bytes));
template <class T> using PrimsOf = decltype(a<T>().prims(arg::ring, arg::headers));
template <class T> using PayloadsOf = decltype(a<T>().payloads(arg::task, arg::headers));
template <class T> using PeerMemoryOf = decltype(a<T>().peerMemory(arg::headers));
template <class T> using OneShotBytes = decltype(a<const T>().oneShotBytes());
template <class T> using MessagesOf = decltype(a<T>().messages(arg::plan));
template <class T> using Abort = decltype(a<T>().abort(arg::text));
template <class T> using Leave = decltype(a<T>().leave(arg::text));
template <class T> using PassOn = decltype(a<T>().passOn(arg::text));

template <class T>
constexpr bool isTransport() {
  static_assert(has<PeerMemoryFlag, T>, "Transport: static constexpr bool kPeerMemory: whether "
                                      "direct runs here (peerMemory)");
  static_assert(has<Meta, T>, "Transport: using Meta = ...: what its header tells the peers "
                              "(dpcore/header.h; NoMeta for nothing)");
  if constexpr (has<Meta, T>) {
    static_assert(fitsHeader<Meta<T>>(), "Transport: Meta must be trivially copyable, default "
                                         "constructible and fit CollHeader (kMetaBytes)");
    static_assert(gives<Annotate, T, Meta<T>>(), "Transport: Meta annotate(const Task&) const: "
                                                 "this rank's facts for the peers, per call");
    static_assert(gives<SharedInput, T, bool>(), "Transport: bool sharedInput(const Meta&): "
                                                 "the input is in memory the peers map (the "
                                                 "tuner's BufferKind)");
  }
  static_assert(gives<Rank, T, int>(), "Transport: int rank() const");
  static_assert(gives<Size, T, int>(), "Transport: int size() const: ranks in the communicator");
  static_assert(gives<Name, T, int>(), "Transport: int name(int r) const: rank r in messages");
  static_assert(has<Validate, T>, "Transport: validate(const Task&): refuse bad input before "
                                  "anything is sent");
  static_assert(has<Begin, T>, "Transport: begin(const CallContext&): the call in flight, for "
                               "its deadline and messages");
  static_assert(gives<Exchange, T, std::vector<CollHeader>>(),
                "Transport: std::vector<CollHeader> exchange(const Task&, const CollHeader& "
                "mine): every rank's header (and a one-shot payload); a barrier");
  static_assert(gives<SegmentBytes, T, size_t>(), "Transport: size_t segmentBytes(): the "
                                                  "ring's segment");
  static_assert(has<CopyAlone, T>, "Transport: copyAlone(void* out, const void* in, size_t "
                                   "bytes): a collective of one rank");
  static_assert(has<PrimsOf, T>, "Transport: prims(const RingCall&, const "
                                 "std::vector<CollHeader>&): the ring's Prims for this call");
  if constexpr (has<PrimsOf, T>) static_assert(isPrims<PrimsOf<T>>());
  static_assert(has<PayloadsOf, T>, "Transport: payloads(const Task&, const "
                                    "std::vector<CollHeader>&): one-shot's Payloads");
  if constexpr (has<PayloadsOf, T>) static_assert(isPayloads<PayloadsOf<T>>());
  if constexpr (peerMemoryOn<T>()) {
    static_assert(has<PeerMemoryOf, T>, "Transport, kPeerMemory: peerMemory(const "
                                        "std::vector<CollHeader>&): direct's PeerMemory");
    if constexpr (has<PeerMemoryOf, T>) static_assert(isPeerMemory<PeerMemoryOf<T>>());
    static_assert(gives<OneShotBytes, T, size_t>(), "Transport, kPeerMemory: size_t "
                                                    "oneShotBytes() const: the largest one-shot "
                                                    "payload (gather, scatter, all_to_all: auto)");
  } else {
    static_assert(has<MessagesOf, T>, "Transport, no kPeerMemory: messages(const ExchangePlan&): "
                                      "gather, scatter and all_to_all's Messages");
    if constexpr (has<MessagesOf, T>) static_assert(isMessages<MessagesOf<T>>());
  }
  static_assert(has<Abort, T>, "Transport: abort(const std::string& why): this rank failed "
                               "the call; tell the peers");
  static_assert(has<Leave, T>, "Transport: leave(const std::string& why): this rank makes no "
                               "more calls; tell the peers");
  static_assert(has<PassOn, T>, "Transport: passOn(const std::string& news): a failure "
                                "elsewhere, for the peers to hear as it is");
  return true;
}

// -- Engine: what Queued<Engine> (core/backend.h) runs, in issue order -------------------------
template <class E> using ValidateCall = decltype(a<const E>().validate(arg::task));
template <class E> using Run = decltype(a<E>().run(arg::task));
template <class E> using ExchangeCounts = decltype(a<E>().exchangeCounts(arg::task));
template <class E> using Sequence = decltype(a<const E>().sequence());
template <class E> using AlgoCalls = decltype(a<const E>().algoCalls());
template <class E> using TracerOf = decltype(a<E>().tracer());
template <class E> using SetTimeout = decltype(a<E>().setTimeout(arg::seconds));

template <class E>
constexpr bool isEngine() {
  static_assert(has<Run, E>, "Engine: run(const Task&): one collective, start to end");
  static_assert(has<ValidateCall, E>, "Engine: validate(const Task&) const: refuse bad input "
                                      "this rank alone sees, before the call is numbered");
  static_assert(gives<ExchangeCounts, E, std::vector<size_t>>(),
                "Engine: std::vector<size_t> exchangeCounts(const Task&): every rank's count "
                "in the task's collective, its headers alone");
  static_assert(has<Leave, E>, "Engine: leave(const std::string& why): as Transport's");
  static_assert(has<PassOn, E>, "Engine: passOn(const std::string& news): as Transport's, and "
                                "refuse every later call");
  static_assert(gives<Sequence, E, uint64_t>(), "Engine: uint64_t sequence() const: calls made");
  static_assert(gives<AlgoCalls, E, std::vector<uint64_t>>(),
                "Engine: std::vector<uint64_t> algoCalls() const: calls run, by Algo");
  static_assert(gives<TracerOf, E, Tracer&>(), "Engine: Tracer& tracer(): its trace");
  static_assert(has<SetTimeout, E>, "Engine: setTimeout(double seconds): every later call's");
  return true;
}

}  // namespace contract
}  // namespace dpcore
