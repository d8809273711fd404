"""How many threads NumPy's BLAS runs, read and capped at run time, after NumPy has loaded it
(OPENBLAS_NUM_THREADS and the like count only before): through threadpoolctl where it is
installed (any BLAS, OpenMP), else by calling the OpenBLAS this process has loaded, whose
symbols NumPy's wheels (scipy-openblas) prefix and suffix."""
import ctypes

# (set, get) under the names of NumPy's wheels' OpenBLAS (64-bit ints), then a plain build's
_OPENBLAS = [("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
             ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
             ("openblas_set_num_threads", "openblas_get_num_threads")]


def threads():
    """The BLAS's threads now, or None where neither threadpoolctl nor an OpenBLAS is found."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        calls = _openblas()
        return calls[1]() if calls else None
    blas = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
    return max(blas) if blas else None


def cap(n):
    """At most n BLAS threads in this process from now on (where a BLAS is found)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        calls = _openblas()
        if calls:
            calls[0](n)
        return
    threadpool_limits(n, user_api="blas")


def _openblas():
    """(set(n), get()) of the OpenBLAS loaded into this process, or None."""
    import numpy  # noqa: F401  (loads its BLAS)

    try:
        with open("/proc/self/maps") as f:  # the libraries loaded (Linux)
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        return None
    for path in sorted(p for p in paths if ".so" in p):
        lib = ctypes.CDLL(path)  # already loaded: the same handle
        for set_name, get_name in _OPENBLAS:
            if hasattr(lib, set_name) and hasattr(lib, get_name):
                set_threads, get_threads = getattr(lib, set_name), getattr(lib, get_name)
                set_threads.argtypes, set_threads.restype = [ctypes.c_int], None
                get_threads.restype = ctypes.c_int
                return set_threads, get_threads
    return None
