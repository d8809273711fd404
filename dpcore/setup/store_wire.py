"""Bootstrap's messages over a torch.distributed Store (dpcore.init(store=..., rank=, size=)):
as under `torchrun`, which hands a process group's backend a c10d Store and no MPI.

A message is one key, f"{prefix}/{mark}/{tag}/{src}->{dst}", its value the pickled object;
the receiver polls with check() (never get(), which would block past the bootstrap's deadline)
and deletes the key once read (the bootstrap keeps what it heard), so a long job's allocs leave
nothing behind.

A store outlives a communicator (torch reuses a process group's, and a program may call
dpcore.init twice on one), so every key carries a mark that no earlier bootstrap on this store
used. Until the hello (the pids) the mark is "generation g", g from store.add on a counter of
this rank's own: the same on every rank, as they begin their communicators in one order; from
then on rank 0's random one, which the hello carried.

Before anything waits, each rank announces its host, pid and the time under the mark ("who"),
so that the peers on its host watch its process from then on, as the launcher's pids do over
MPI: a rank killed before its hello is named at once. Two processes that claim one rank both
count on its counter, so the second is one generation on: it finds the first's announcement,
from a process of this job (alive, or begun after it), in the generation before its own, and
says so instead of waiting for peers that are not coming.

The counters outlive a job too (a FileStore's file reused by the next job): a rank of an earlier
job that died in its bootstrap leaves its counter, its announcement and its unread messages. So
a message before the hello carries its sender's pid, and is taken only from the process that
announced itself for that rank; an announcement from a process that is gone and was made before
this one began is an earlier job's: its rank is not blamed for it, and where that rank's live
process has counted further, this rank moves on to its generation (the counters of the jobs'
ranks differ by what the earlier job left).
"""
import os
import pickle
import sys
import time

from .bootstrap import WireError, host_id, process_gone


class StoreWire:
    """Messages among `size` ranks, this one `rank`, through `store` under `prefix`."""

    comm = None  # no MPI communicator: the steps that need one are refused before they run

    def __init__(self, store, rank, size, prefix="dpcore"):
        self.store, self.rank, self.size, self.prefix = store, rank, size, prefix
        self._broken = None  # why the store failed
        try:
            self._generation = self._store(store.add, f"{prefix}/begun/{rank}", 1)
        except WireError:  # the hello fails alike, in the bootstrap: "dpcore init on rank R"
            self._generation = 0
        self.mark = f"generation {self._generation}"
        self._host, self._pid = host_id(), os.getpid()
        self._announce()
        self._claimed = 0  # the pid of another process of this job found holding this rank
        self._early = []  # what was sent before the hello: sent again if this rank moves on

    def pids(self):
        """Nothing is known of the peers yet: watch() learns their pids as they announce."""
        return [0] * self.size

    def watch(self, pids):
        """Before the hello: the pids of the peers on this host that have announced themselves,
        into `pids`; why this rank cannot go on ("" if it can): another process of this job took
        it."""
        for r in [r for r in range(self.size) if r != self.rank and not pids[r]]:
            who = self._announced(self._generation, r)
            if who is not None and self._stale(who):
                self._follow(r)
            elif who is not None and who[0] == self._host:
                pids[r] = who[1]
        if not self._claimed and self._generation > 1:
            who = self._announced(self._generation - 1, self.rank)
            if (who is not None and who[0] == self._host and who[1] != self._pid
                    and not self._stale(who)):  # live, or began after this one: this job's
                self._claimed = who[1]
        if self._claimed:
            return (f"rank {self.rank} was claimed twice: by pid {self._claimed} and by this "
                    f"process, pid {self._pid} (each process of a job takes a rank of its own)")
        return ""

    def _announce(self):
        self._send_quietly((self._host, self._pid, time.time()),
                           self._who(self._generation, self.rank))

    def _stale(self, who):
        """Whether announcement `who` is an earlier job's: its process, on this host, is gone,
        and announced itself before this process began."""
        host, pid, when = who
        return host == self._host and when < _STARTED and process_gone(pid)

    def _follow(self, r):
        """Rank r's announcement in this generation is an earlier job's: if r's live process
        counted further, move on to its generation, sending again what was sent here."""
        g, live = self._generation + 1, None
        while (who := self._announced(g, r)) is not None:
            live = g if not self._stale(who) else live
            g += 1
        if live is None:
            return
        try:
            self._store(self.store.add, f"{self.prefix}/begun/{self.rank}",
                        live - self._generation)
        except WireError:  # the step's own messages fail too, and say so
            return
        early = self._early
        for _, peers, tag in early:
            for dst in peers:
                self._store(self.store.delete_key, self._key(tag, self.rank, dst))
        self._generation, self._early = live, []
        self.mark = f"generation {live}"
        self._announce()
        for obj, peers, tag in early:
            self.send(obj, peers, tag)

    def _who(self, generation, rank):
        return f"{self.prefix}/generation {generation}/who/{rank}"

    def _announced(self, generation, rank):
        key = self._who(generation, rank)
        try:
            if self._store(self.store.check, [key]):
                return pickle.loads(self._store(self.store.get, key))
        except WireError:  # the step's own messages fail too, and say so
            pass
        return None

    def _send_quietly(self, obj, key):
        try:
            self._store(self.store.set, key, pickle.dumps(obj))
        except WireError:  # the step's own messages fail too, and say so
            pass

    def settle(self, boot):
        pass  # the keys of this bootstrap already differ from any other's (the mark)

    def dup(self, boot, mpi_comm, what):
        raise RuntimeError(f"dpcore {what}: a communicator made on a store has no MPI")

    def send(self, obj, peers, tag):
        """obj to each rank in `peers`, under `tag`: "hello", "abort" or a step's number."""
        value = pickle.dumps((self._pid, obj))
        if self._before_hello():
            self._early.append((obj, peers, tag))
        for dst in peers:
            self._store(self.store.set, self._key(tag, self.rank, dst), value)

    def take(self, source, tag):
        """[what came from `source` (any, if None) under `tag`]: at most one per source, as
        each (tag, source) is sent once in a bootstrap."""
        sources = [r for r in range(self.size) if r != self.rank] if source is None else [source]
        taken = []
        for src in sources:
            key = self._key(tag, src, self.rank)
            if self._store(self.store.check, [key]):
                pid, obj = pickle.loads(self._store(self.store.get, key))
                self._store(self.store.delete_key, key)
                if not self._before_hello() or self._sent_by(pid, src):
                    taken.append(obj)
        return taken

    def _before_hello(self):
        return self.mark.startswith("generation ")

    def _sent_by(self, pid, src):
        """Whether process `pid` is the one announced as rank `src` in this generation (else
        its message is an earlier job's, left unread)."""
        who = self._announced(self._generation, src)
        return who is not None and who[1] == pid and not self._stale(who)

    def all_sent(self, sources, tag):
        """Whether every rank in `sources` has sent under `tag`: one round trip to the store
        while a step waits, where take() would make one per source."""
        return self._store(self.store.check, [self._key(tag, src, self.rank) for src in sources])

    def flush(self, seconds):
        pass  # a set() has reached the store when it returns

    def _key(self, tag, src, dst):
        return f"{self.prefix}/{self.mark}/{tag}/{src}->{dst}"

    def _store(self, call, *args):
        # once failed, not asked again: a TCPStore whose server is gone fails every call, and
        # logs each failure with a stack trace
        if self._broken is None:
            try:
                return call(*args)
            except Exception as e:  # torch's DistStoreError, or a lost connection's RuntimeError
                first = (str(e).strip().splitlines() or [""])[0]  # torch appends a C++ stack
                self._broken = f"the store failed: {type(e).__name__}: {first}"
        raise WireError(self._broken)


def _process_start():
    """When this process began, in time.time()'s clock (/proc: its start in clock ticks since
    boot; CLOCK_BOOTTIME: now since boot)."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        since_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
        return time.time() - since_boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return time.time()  # at import: later than the process began, never earlier


_STARTED = _process_start()


def refuse_what_needs_mpi(boot, settings):
    """Raise on a communicator made on a store (boot, a dpcore.setup.bootstrap.Bootstrap) where the
    ranks or the settings need MPI: between hosts only MPI carries dpcore's bytes. Every rank
    knows every rank's host, so on several hosts every rank raises alike; a setting of one
    rank's own fails that rank, which tells the others (Bootstrap.fail)."""
    launch = ("launch with mpiexec or srun and call dpcore.init() without a store "
              "(choose the transport)")
    hosts = sorted(set(boot.hosts))
    if len(hosts) > 1:
        raise RuntimeError(f"dpcore init on rank {boot.rank}: the ranks run on {len(hosts)} "
                           f"hosts ({', '.join(hosts)}), and across hosts dpcore needs MPI: "
                           f"{launch}")
    needs = {"DPCORE_TRANSPORT=mpi": settings.transport == "mpi",
             f"DPCORE_NODE_SIZE={settings.node_size}": settings.node_size > 0}
    for setting, needed in needs.items():
        if needed:
            raise ValueError(f"dpcore init on rank {boot.rank}: {setting} needs MPI, and this "
                             f"communicator is made on a store: {launch}")


def trace_gather(wire, timeout):
    """For DPCORE_TRACE (dpcore.trace) at exit: a function that brings every rank's list of
    items (its trace file) to rank 0 through the store of `wire` (a StoreWire, its mark still
    this communicator's) and returns them there, with the ranks missing (None elsewhere). Rank 0
    waits for each rank's at most `timeout` seconds, and says who is missing."""
    def key(rank):
        return f"{wire.prefix}/{wire.mark}/trace/{rank}"

    def gather(items):
        if wire.rank != 0:
            wire.store.set(key(wire.rank), pickle.dumps(items))
            return None
        everyone, missing = list(items), list(range(1, wire.size))
        deadline = time.monotonic() + timeout
        while missing and time.monotonic() < deadline:
            for r in [r for r in missing if wire.store.check([key(r)])]:
                everyone += pickle.loads(wire.store.get(key(r)))
                wire.store.delete_key(key(r))
                missing.remove(r)
            time.sleep(0.01)
        if missing:
            print(f"dpcore: DPCORE_TRACE: no word from ranks {missing} after {timeout:g} s",
                  file=sys.stderr)
        return everyone, missing
    return gather
