"""Buckets: consecutive parameters whose gradients one collective reduces, launched in order.

Gradients are cut into buckets of about bucket_cap_mb taken from the last parameter backwards,
the order in which backward produces them (at stage 3 each unit is one bucket: units.py). A
bucket is a run of consecutive parameters, hence a slice of the flat buffers. When backward has
added the last gradient of a bucket, its reduction starts (async) while backward goes on with
earlier layers; step() waits only for what is still in flight.

Buckets are launched strictly in bucket order: collectives on a communicator must be issued in
the same order on every rank, and a bucket that is ready early on one rank must not overtake
one that is late there. Parameters that the forward did not use will get no gradient, so the
engine marks them ready at once (their gradient: whatever is in the buffer, zeros after
zero_grad); step() launches any bucket still waiting. Nothing ever waits for a gradient that
never comes.
"""


def by_size(flat, cap_bytes):
    """Parameter indices grouped from the last backwards, each group about cap_bytes."""
    buckets, current, nbytes = [], [], 0
    for i in reversed(range(len(flat.params))):
        current.append(i)
        nbytes += flat.params[i].data.nbytes
        if nbytes >= cap_bytes:
            buckets.append(current)
            current, nbytes = [], 0
    if current:
        buckets.append(current)
    return buckets


class Launcher:
    """Calls reduce(b) for bucket b, which returns its Work, once every gradient of b is ready
    and every bucket before b has been launched."""

    def __init__(self, buckets, reduce):
        self.buckets, self._reduce = buckets, reduce
        self._bucket_of = {i: b for b, bucket in enumerate(buckets) for i in bucket}
        self.reset()

    def reset(self):
        """A new step: no gradient ready, nothing launched."""
        self._ready = set()
        self._missing = [len(bucket) for bucket in self.buckets]  # gradients still to come
        self.next = 0  # the next bucket to launch
        self.works = []  # of the launched buckets, in bucket order

    def mark_ready(self, i):
        """Parameter i's gradient is final for this step."""
        b = self._bucket_of[i]
        if i in self._ready:
            if b < self.next:
                raise RuntimeError(
                    "DataParallel: a gradient arrived after its bucket was reduced (two "
                    "backwards in one step?); accumulate inside engine.no_sync()")
            return
        self._ready.add(i)
        self._missing[b] -= 1
        while self.next < len(self.buckets) and self._missing[self.next] == 0:
            self._launch()

    def launch_rest(self):
        """Launch every bucket not launched yet, ready or not (step(), no_sync, no overlap)."""
        while self.next < len(self.buckets):
            self._launch()

    def _launch(self):
        self.works.append(self._reduce(self.next))
        self.next += 1
