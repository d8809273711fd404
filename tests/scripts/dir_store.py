"""The five calls of a torch.distributed Store that dpcore's bootstrap makes (set, get, check, add,
delete_key), one file per key in a directory: for the fault tests, whose ranks would otherwise
spend most of their time importing torch (about 4 s of CPU each). The tests of the collectives
use torch's own stores (FileStore, and the TCPStore of torchrun's agent)."""
import fcntl
import os
from urllib.parse import quote


class DirStore:
    def __init__(self, directory):
        self.directory = directory
        os.makedirs(directory, exist_ok=True)

    def _path(self, key):
        return os.path.join(self.directory, quote(key, safe=""))

    def set(self, key, value):
        value = value.encode() if isinstance(value, str) else value
        tmp = self._path(key) + f".tmp{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(value)
        os.replace(tmp, self._path(key))  # a reader sees all of it or nothing

    def get(self, key):
        with open(self._path(key), "rb") as f:
            return f.read()

    def check(self, keys):
        return all(os.path.exists(self._path(k)) for k in keys)

    def add(self, key, amount):
        with open(os.path.join(self.directory, ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            value = int(self.get(key)) + amount if self.check([key]) else amount
            self.set(key, str(value))
            return value

    def delete_key(self, key):
        try:
            os.unlink(self._path(key))
            return True
        except FileNotFoundError:
            return False
