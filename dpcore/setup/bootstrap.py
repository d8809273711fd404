"""Setting a communicator up without a call that could wait forever.

Everything dpcore.init and Communicator.alloc exchange goes point to point and is polled against
the deadline, while watching the peers:

- the pids are the first thing exchanged, so from then on a peer on this host whose process is
  gone fails the step at once, on every rank that waits for it;
- a rank whose setup fails for any other reason tells every peer (fail), and they raise too;
- a peer that never comes is named when the timeout runs out.

Bootstrap is one rank's view of all the ranks and the steps among them; Group the same calls
among some of them (the ranks of a node), each addressed by its rank in the group. The messages
travel on a wire, which only sends and takes them: dpcore.setup.mpi_wire over an MPI communicator
(a blocking MPI call would wait forever for a rank that died, and pip's MPICH reports no dead
process), or dpcore.setup.store_wire over a torch.distributed Store, where no MPI is in the job.
"""
import os
import secrets
import socket
import time

from .. import _C
from .segments import unlink_made_by


class WireError(RuntimeError):
    """The wire itself failed (a store whose server is gone): the step fails with it."""


def process_gone(pid):
    """Whether process `pid` of this host has ended (or is a zombie: killed, not yet reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("Z", "X")


# Where launchers put a process's rank in MPI_COMM_WORLD: MPICH's and Intel's hydra, Open MPI,
# PMIx (MPI_RANK_VARIABLES), and Slurm.
MPI_RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")
RANK_VARIABLES = (*MPI_RANK_VARIABLES, "SLURM_PROCID")


def launcher_pids():
    """{rank in MPI_COMM_WORLD: pid} of this job's processes on this host, read from /proc: so
    the very first exchange can notice a peer that dies before it sends its own pid. They are
    the processes near this one in the process tree (their parent or its parent is this one's
    parent or its parent: the launcher's proxy, or a wrapper it runs) whose environment has the
    launcher's rank variable; where a wrapper and the process it runs both have it, the one
    further down is the rank."""
    variable = next((v for v in RANK_VARIABLES if v in os.environ), None)
    if variable is None or not os.path.isdir("/proc"):
        return {}
    procs = _processes(f"{variable}=".encode())
    parent = procs.get(os.getpid(), (None, None))[0]
    near = {parent, procs.get(parent, (None, None))[0]} - {None}
    found = {}
    for pid, (ppid, rank) in procs.items():
        if rank is None or not ({ppid, procs.get(ppid, (None, None))[0]} & near):
            continue
        held = found.get(rank)
        if held is None or procs.get(pid, (None,))[0] == held:  # pid runs under the wrapper
            found[rank] = pid
    return found


def _processes(prefix):
    """{pid: (its parent's pid, the number after `prefix` in its environment, or None)}."""
    procs = {}
    for entry in os.scandir("/proc"):
        parent = _parent(entry.name) if entry.name.isdigit() else None
        if parent is not None:
            procs[int(entry.name)] = (parent, _number_in_environment(entry.name, prefix))
    return procs


def _parent(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:  # "pid (command) state ppid ..."
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _number_in_environment(pid, prefix):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return next((int(v[len(prefix):]) for v in f.read().split(b"\0")
                         if v.startswith(prefix)), None)
    except (OSError, ValueError):  # another user's process, or one that just ended
        return None


def host_id():
    """What tells this host from others: its name and this boot's id."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f"{socket.gethostname()}/{f.read().strip()}"
    except OSError:
        return socket.gethostname()


class Bootstrap:
    """Exchanges among every rank of `wire` (dpcore.setup.mpi_wire.MpiWire or
    dpcore.setup.store_wire.StoreWire), each step within `timeout` seconds. Each step's `what` names
    it in messages: "phase: step", as in "init: map shared memory"."""

    def __init__(self, wire, timeout):
        self.wire, self.timeout = wire, timeout
        self.rank, self.size = wire.rank, wire.size
        self.pids = wire.pids()  # 0: not known, or on another host
        # Steps begun and completed: a peer that left after completing step k fails only the
        # steps after k, not one it did its part of while this rank still waits for others.
        self._step = self._done = 0
        self._failed = False  # this rank said its setup failed
        self._news = None  # a peer's failure that failed this rank, to pass on as it is
        self._heard = []  # (steps it completed, why) of each peer that left
        # First the pids, straight from each rank to every other (under a tag of their own): sent
        # before anything waits, they reach the peers even from a rank that dies at once. Until
        # they come, the launcher's (wire.pids(): launcher_pids) watch the peers on this host;
        # only the deadline watches a rank found in neither. Every message carries the wire's
        # mark, and one with another is never taken: until the hello, how many bootstraps this
        # rank has begun on the wire's communicator or store; after it, rank 0's random one.
        host = host_id()
        self._before_hello = True  # the wire may still learn the peers' pids (wire.watch)
        try:
            everyone = self.allgather((host, os.getpid(), secrets.token_hex(8), self.size),
                                      "init: exchange hosts and pids", tag="hello")
            self.hosts = [h for h, _, _, _ in everyone]
            self.pids = [p if h == host else 0 for h, p, _, _ in everyone]
            self._before_hello = False
            self._check_sizes([n for _, _, _, n in everyone])
            wire.mark = everyone[0][2]  # rank 0's: this bootstrap's, on every rank
            wire.settle(self)  # over MPI: a duplicate communicator, dpcore's own
        except BaseException as e:
            self.fail(e)  # a peer that waits for what this rank knows hears it
            raise
        self.world = Group(self, range(self.size))

    def _check_sizes(self, sizes):
        """Every rank must have been given the same size (over a store each is told its own): a
        rank told a larger one waits in the hello for ranks that never come."""
        if len(set(sizes)) > 1:
            self._done -= 1  # the hello failed here: a peer still in it must hear it (leave)
            told = ", ".join(f"rank {r}: {n}" for r, n in enumerate(sizes))
            raise ValueError(f"dpcore init on rank {self.rank}: the ranks were given different "
                             f"sizes ({told})")

    @property
    def comm(self):
        """The MPI communicator the messages travel on (None on a store)."""
        return self.wire.comm

    def group(self, ranks):
        """The same calls among `ranks` only (this rank among them)."""
        return Group(self, ranks)

    # -- the steps ------------------------------------------------------------------------------

    def allgather(self, obj, what, ranks=None, tag=None):
        """[obj of each rank in `ranks`] (default: all), on each of them."""
        ranks = range(self.size) if ranks is None else ranks
        step = self._begin_step()
        tag = step if tag is None else tag
        self._send(obj, [r for r in ranks if r != self.rank], tag, what)
        got = self._receive([r for r in ranks if r != self.rank], tag, what, {self.rank: obj},
                            ranks)
        self._done = self._step
        return got

    def bcast(self, obj, root, what, ranks=None):
        """root's obj, on every rank of `ranks` (default: all)."""
        ranks = range(self.size) if ranks is None else ranks
        tag = self._begin_step()
        if self.rank == root:
            self._send(obj, [r for r in ranks if r != root], tag, what)
        else:
            obj = self._receive([root], tag, what, {}, [root])[0]
        self._done = self._step
        return obj

    def wait_until(self, test, what):
        """A step in which every rank waits until test() (an MPI request's Test: a collective
        call of every rank), watching all of them."""
        self._begin_step()
        self._poll(test, what, [r for r in range(self.size) if r != self.rank])
        self._done = self._step

    def dup(self, mpi_comm, what):
        """A duplicate of mpi_comm (every rank of it calls this); over MPI only."""
        return self.wire.dup(self, mpi_comm, what)

    def fail(self, error):
        """This rank's setup failed: tell every peer, so that none waits for it in vain. Where
        a peer's failure was the cause, that goes on as it is, naming where it began."""
        self.leave(f"failed: {error}")

    def leave(self, why):
        """This rank takes no further part ("failed: ...", "closed its communicator"): peers in a
        step, or in a later one, raise instead of waiting for it."""
        if self._failed:
            return
        self._failed = True
        news = (self._done, self._news or f"rank {self.rank} {why}")
        try:
            self.wire.send(news, [r for r in range(self.size) if r != self.rank], "abort")
            # a rank that fails often exits at once: push these out first
            self.wire.flush(0.1)
        except WireError:  # nowhere to tell it (the store is gone): the peers' pids or deadline
            pass

    @property
    def news(self):
        """The peer's failure that failed this rank's last step ("rank 1 (pid 7) died")."""
        return self._news

    # -- plumbing -------------------------------------------------------------------------------

    def _begin_step(self):
        """Numbers the step (every rank takes part in the same steps, each in its own group)
        and returns it: the step's tag."""
        self._step += 1
        return self._step

    def _send(self, obj, peers, tag, what):
        try:
            self.wire.send(obj, peers, tag)
        except WireError as e:
            self._lost(e, what, peers)

    def _receive(self, peers, tag, what, got, order):
        waiting = list(peers)

        def arrived():
            if not self.wire.all_sent(waiting, tag):
                return False
            for r in list(waiting):
                taken = self.wire.take(r, tag)
                if taken:
                    got[r] = taken[0]
                    waiting.remove(r)
            return not waiting

        self._poll(arrived, what, waiting)
        return [got[r] for r in order]

    def _poll(self, done, what, waiting):
        """Until done(): raises CommError when a rank in `waiting` died, a peer failed, or the
        timeout runs out."""
        start = time.monotonic()
        pause, next_look = 1e-5, start
        while not self._done_or_lost(done, what, waiting):
            now = time.monotonic()
            if now >= next_look:
                next_look = now + 0.02
                self._look(what, waiting)
            if now - start > self.timeout:
                who = ", ".join(map(str, waiting))
                self._raise(f"timed out after {self.timeout:g} s waiting for "
                            f"rank{'s' if len(waiting) > 1 else ''} {who}", what)
            time.sleep(pause)
            pause = min(2 * pause, 1e-3)

    def _done_or_lost(self, done, what, waiting):
        try:
            return done()
        except WireError as e:
            self._lost(e, what, waiting)

    def _lost(self, error, what, peers):
        """The wire failed: the store may have gone with a rank that died, which is named."""
        self._look(what, peers)
        self._raise(str(error), what)

    def _look(self, what, waiting):
        # a peer's failure first: one that failed and then exited says why, its pid cannot
        self._take_news(what)
        if self._before_hello:  # the pids the peers announced, and whether a rank was taken
            why = self.wire.watch(self.pids)
            if why:
                self._raise(why, what)
        dead = [r for r in waiting if self.pids[r] and process_gone(self.pids[r])]
        if dead:
            # what a rank said just before it exited may still be on its way
            until = time.monotonic() + 0.05
            while time.monotonic() < until:
                self._take_news(what)
                time.sleep(1e-3)
            for r in dead:
                unlink_made_by(self.pids[r])
            self._raise(", ".join(f"rank {r} (pid {self.pids[r]})" for r in dead) + " died", what)

    def _take_news(self, what):
        try:
            self._heard += self.wire.take(None, "abort")
        except WireError:  # the step's own messages fail too, and say so
            pass
        for done, why in self._heard:
            if done < self._step:  # it left before this step
                self._raise(why, what)

    def _raise(self, why, what):
        """CommError "dpcore init on rank 0: rank 1 (pid 7) died (exchange hosts and pids)",
        for what = "init: exchange hosts and pids", as a collective's would read."""
        self._news = why  # what fail() passes on, rather than this rank's failure
        phase, _, step = what.partition(": ")
        raise _C.CommError(f"dpcore {phase} on rank {self.rank}: {why} ({step})")


class Group:
    """Some ranks of a Bootstrap (the ranks of one node, or all), each called by its rank here."""

    def __init__(self, boot, ranks):
        self.boot, self.ranks = boot, list(ranks)
        self.rank, self.size = self.ranks.index(boot.rank), len(self.ranks)

    def allgather(self, obj, what):
        return self.boot.allgather(obj, what, self.ranks)

    def bcast(self, obj, root, what):
        return self.boot.bcast(obj, self.ranks[root], what, self.ranks)

    def on_every_rank(self, step, what):
        """step() here; raise on every rank of the group if it raised on any."""
        result, _, _, failed = self._step_everywhere(step, what, lambda result: None)
        if failed:
            raise RuntimeError(failed)
        return result

    def agree(self, step, what, share):
        """(step() here, [share(its result) of every rank of the group]), for a step that checks
        this rank's own input: where it raised here, its own error; where it raised only on
        peers, a ValueError that names them. Every rank takes part in the exchange, so none
        waits for one whose step raised."""
        result, error, shared, failed = self._step_everywhere(step, what, share)
        if error is not None:
            raise error
        if failed:
            raise ValueError(failed)
        return result, shared

    def _step_everywhere(self, step, what, share):
        """(step()'s result here, its error here, [share(result) of every rank], and, where it
        raised on any rank, "dpcore PHASE: cannot STEP: rank R: why; ..." else None)."""
        try:
            result, error = step(), None
        except Exception as e:
            result, error = None, e
        why = error and (str(error) or type(error).__name__)
        everyone = self.allgather((None, why) if error else (share(result), None), what)
        failed = [f"rank {r}: {e}" for r, (_, e) in zip(self.ranks, everyone) if e]
        phase, _, step_name = what.partition(": ")
        message = f"dpcore {phase}: cannot {step_name}: " + "; ".join(failed) if failed else None
        return result, error, [s for s, _ in everyone], message

