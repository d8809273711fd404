"""The copy floor: how many bytes a plain copy must move, on every rank at once, to cause the same
device-memory traffic as the ring's collective (docs/busbw.md, "The copy floor").

Per rank, the ring on n ranks of an S-byte buffer receives R bytes and reduces D of them:
  - every byte it receives is read once (where the peer holds it) and written once (where it
    lands): 2 bytes of traffic;
  - every byte it reduces is read once more (its own operand): 1 byte more.
Its kernels move 2R + D bytes; a copy of B bytes reads and writes each byte, 2B. So the floor is a
copy of R + D/2 bytes on every rank at once, and nothing that moves the ring's bytes through
device memory can beat it:

    collective       R             D            floor copy per rank
    all_reduce       2(n-1)/n S    (n-1)/n S    5/2 (n-1)/n S      (2 ranks: 1.25 S)
    reduce_scatter   (n-1)/n S     (n-1)/n S    3/2 (n-1)/n S
    all_gather       (n-1)/n S     0            (n-1)/n S
    broadcast        (n-1)/n S     0            (n-1)/n S
    reduce           (n-1)/n S     (n-1)/n S    3/2 (n-1)/n S
    gather, scatter  (n-1)/n^2 S   0            (n-1)/n^2 S
    all_to_all       (n-1)/n S     0            (n-1)/n S
    sendrecv         S             0            S

R and D are the ring's bytes and bytes reduced per rank, its row of the table of collectives
(dpcore.collectives); where no ring runs the collective, direct's, whose amounts are the busiest
rank's: gather's and scatter's root moves (n-1)/n S, which over the n ranks is (n-1)/n^2 S each.
sendrecv (not a table row: point to point) receives S on every rank. For broadcast R is the mean over the ranks: n-1 of them receive S, the root
none, and on a GPU the ranks share, the device carries the sum. Ranks that share a GPU share its
bandwidth: the floor's copies run on all of them at once, as the collective's kernels do, so the
measured floor counts every rank's bytes.
"""
from .. import collectives


def floor_bytes(coll, n, size):
    """Bytes each of n ranks copies, all at once, for the copy floor of `coll` (the ring's, or
    direct's where no ring runs it; "sendrecv" too) on a buffer of `size` bytes (nccl-tests'
    size: the whole buffer): R + D/2 (module docstring)."""
    if n <= 1:
        return 0
    if coll == "sendrecv":
        return size
    row = collectives.get(coll)
    if "ring" not in row.algorithms:
        direct = row.algorithms["direct"]
        received = direct.bytes.factor(n) / (n if row.rooted else 1)
        return round(size * (received + direct.reduced.factor(n) / 2))
    ring = row.algorithms["ring"]
    # the ring's amounts are all in chunks: units of (n-1)/n S
    received, reduced = ring.bytes.chunks, ring.reduced.chunks
    return round((n - 1) / n * size * (received + reduced / 2))


def achieved(floor_seconds, seconds):
    """The fraction of the floor a call reached: the floor's time over the call's (1: as fast as
    the copy); None where either was not measured."""
    if not floor_seconds or not seconds:
        return None
    return floor_seconds / seconds
