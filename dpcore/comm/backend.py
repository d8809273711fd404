"""The Backend protocol: the raw calls the call path makes on a transport's compiled backend.

Every backend is a dpcore._C object whose class derives from _C.Backend (ShmBackend,
MpiBackend, HierarchicalBackend: dpcore.setup.transports.connect makes them; DeviceBackend:
dpcore.setup.device_transport.connect); all run the same C++ machinery (csrc/core/): call
matching, the in-order worker, the algorithms. The Communicator has checked every argument before
it calls; codes are those of dpcore.dtypes. tests/test_package_shape.py checks that every method the
compiled classes bind is stated here.
"""
from typing import List, Protocol, Tuple


class Job(Protocol):
    """An async collective in flight (_C.Job)."""

    def wait(self, timeout: float = -1.0) -> bool:
        """True once done (raising the collective's CommError if it failed); False if
        `timeout` seconds (negative: no limit) passed first."""

    def done(self) -> bool:
        """Whether it finished, without waiting."""

    def failed(self) -> bool:
        """Whether it finished with an error (which wait() raises)."""


class Backend(Protocol):
    sequence: int  # collectives this backend has started

    def run(self, coll: int, dtype: int, op: int, root: int, algo: int, in_array, out_array,
            count: int, total: int, table: int = 0) -> None:
        """One collective, blocking, after any queued ones. in_array and out_array are C-contiguous
        NumPy arrays (out_array is written; broadcast: both are the buffer; None where the rank
        has no output: reduce off the root); count: elements of in_array (all_gather: this
        rank's shard), total: of the all_gather output, else count (csrc/include/dpcore/task.h
        says it per collective); table: the address of the call's uint64 table, which the
        caller keeps alive, or 0: all_to_all's n x n splits, or scatter's root's pieces' addresses
        where x came as a list (in_array is the first; each piece as long as its own out)."""

    def submit(self, coll: int, dtype: int, op: int, root: int, algo: int, in_array, out_array,
               count: int, total: int, table: int = 0) -> Job:
        """The same, async: it runs in issue order on a background thread. The caller keeps
        both arrays alive until the Job is done."""

    def exchange_counts(self, coll: int, root: int, dtype: int, mine: int) -> List[int]:
        """Every rank's shard length for an all_gather, or for a gather on its root that sizes
        its out (a collective: only headers travel; the non-roots' gather meets it)."""

    def drain(self) -> None:
        """Wait until every queued collective is done."""

    def algo_calls(self) -> List[int]:
        """Collectives run per algorithm code, auto counted as what it ran (after drain)."""

    def set_timeout(self, seconds: float) -> None:
        """How long later collectives may wait for a peer."""

    def enable_trace(self, on: bool) -> None:
        """Record a span per collective and per ring step (DPCORE_TRACE)."""

    def take_trace(self) -> List[Tuple[str, int, int, int, int, int, int, int, int]]:
        """The recorded (name, start_us, duration_us, seq, step, bytes, algo, dtype, op), the
        last three codes or -1 (ring steps), cleared."""

    def log_choices(self, prefix: str) -> None:
        """DPCORE_DEBUG=INFO: print a line on stderr, after `prefix`, the first time a
        (collective, dtype, power-of-two size class, algorithm) runs."""

    def trace_to(self, path: str, lane: int) -> None:
        """Record, and append the records to `path` as JSON lines [lane, *record] when each
        collective ends and every _C.TRACE_BATCH records (DPCORE_TRACE's streaming)."""

    def flush_trace(self) -> None:
        """Once the queued collectives are done, append what is still held to the stream."""

    def trace_peak(self) -> int:
        """The most records held in memory at once."""

    def leave(self, why: str) -> None:
        """This rank makes no more calls: the peers hear `why` rather than wait for it."""

    def pass_on(self, news: str) -> None:
        """A peer's failure heard elsewhere (in alloc): refuse later calls, and tell the peers."""

    def meet_other_side(self, coll: int) -> None:
        """Before the communicator's first call on CUDA arrays (collective `coll`) sets up its
        device side, on its host backend: where that is shared memory, meet the peers there,
        so that one that made the call on host arrays is a CommError on every rank at once."""


class ShmBackend(Backend, Protocol):
    def can_read_peers(self) -> bool:
        """Whether this rank may read its peers' memory (process_vm_readv): direct can run."""

    def unlink(self) -> None:
        """Remove the segment's name, once every rank has mapped it."""

    def set_peer_reads(self, ok: bool) -> None:
        """Whether every rank of the node may read its peers' memory (agreed at init); without,
        gather, scatter and all_to_all move through the shared segment in rounds."""


class DeviceBackend(Backend, Protocol):
    """The device transport's backend: the same calls on device pointers, after the work queued
    on a CUDA stream (cudaStream_t as an int), and the CUDA IPC set-up."""

    device: str      # what it runs on: "cuda:0", "emulated"
    handle: bytes    # the IPC handle of this rank's slots, for the peers to map

    def run_device(self, coll: int, dtype: int, op: int, root: int, algo: int, in_ptr: int,
                   out_ptr: int, count: int, total: int, stream: int, splits: int = 0) -> None:
        """As run, on device pointers, after the work queued on `stream` before the call."""

    def submit_device(self, coll: int, dtype: int, op: int, root: int, algo: int, in_ptr: int,
                      out_ptr: int, count: int, total: int, stream: int,
                      splits: int = 0) -> Job:
        """As submit, on device pointers."""

    def counts(self) -> dict:
        """What the kernels moved so far (Communicator.device_counts), once the queue drains."""

    def pair_sides(self, host: Backend) -> None:
        """At connection, before the first call: number calls in one count with `host` (the
        communicator's host backend), and find a peer that made a call on the other side."""

    def map_peers(self, handles: List[bytes]) -> None:
        """Map every rank's slots (their IPC handles, in rank order)."""

    def alloc_region(self, nbytes: int) -> Tuple[int, bytes]:
        """comm.alloc(device="cuda"): (this rank's new zero-filled buffer, its IPC handle)."""

    def export_buffer(self, ptr: int, nbytes: int) -> Tuple[bytes, int]:
        """comm.register: (the IPC handle of the allocation that holds this rank's buffer, the
        buffer's offset in it)."""

    def map_region(self, region: int, nbytes: int, handles: List[bytes], bases: List[int],
                   offsets: List[int], owned: bool) -> None:
        """Map every rank's buffer of `region` (each at its offset in the allocation its handle
        names); bases: their addresses in their own process; owned: alloc_region's buffers."""

    def unmap_region(self, region: int) -> None:
        """Unmap the peers' buffers of `region`, which every rank has dropped."""

    def free_region(self, region: int) -> None:
        """Free this rank's buffer of `region`, once every rank has unmapped it."""

    def unlink(self) -> None:
        """Remove the host segment's name, once every rank has mapped it."""

    def unlink_slots(self) -> None:
        """Remove the device slots' names, once every rank has mapped every peer's."""

    def peers_gone(self) -> bool:
        """Whether every peer has left or died (then this rank may free what they mapped)."""
