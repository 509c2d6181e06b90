"""ctypes bindings of libkdalab.so: the few C entry points the module calls.

The library is found, in order, at $KDALAB_LIBRARY, beside this file (an
installed package carries its own copy), or in the source tree's build/
directory (run `make lib` first).
"""

import ctypes
import os
import threading

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
_CANDIDATES = [
    os.environ.get("KDALAB_LIBRARY", ""),
    os.path.join(_HERE, "libkdalab.so"),
    os.path.join(_HERE, "..", "..", "build", "libkdalab.so"),
]


def _load():
    for path in _CANDIDATES:
        if path and os.path.exists(path):
            return ctypes.CDLL(os.path.abspath(path)), os.path.abspath(path)
    raise ImportError(
        "kdalab: libkdalab.so not found (looked at $KDALAB_LIBRARY, %s and the source "
        "tree's build/); run `make lib` in the repository, or `pip install .`" % _HERE)


lib, LIBRARY_PATH = _load()

# status codes (kdalab_status.h)
OK, ERANGE = 0, 8
FORM_RECURRENT, FORM_CHUNK = 0, 1  # kdalab_form (kdalab_call.h)
IMPLS = {"reference": 0, "simd": 1}  # kdalab_impl (kdalab_call.h)


class Dims(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("B", "T", "H", "K", "V")]


class ChunkOpts(ctypes.Structure):
    _fields_ = [("chunk", ctypes.c_size_t), ("subchunk", ctypes.c_size_t),
                ("decay", ctypes.c_int), ("precision", ctypes.c_int),
                ("bwd_state_bytes", ctypes.c_size_t), ("h_chunk", ctypes.c_size_t)]


class Call(ctypes.Structure):
    """kdalab_call: what one call is, everything but its arrays."""
    _fields_ = [("dims", Dims), ("HV", ctypes.c_size_t),
                ("cu_seqlens", ctypes.POINTER(ctypes.c_int64)), ("n_seqs", ctypes.c_size_t),
                ("mech", ctypes.c_int), ("scale", ctypes.c_double), ("form", ctypes.c_int),
                ("impl", ctypes.c_int), ("opts", ctypes.POINTER(ChunkOpts)),
                ("work", ctypes.c_void_p)]


_D = ctypes.POINTER(ctypes.c_double)


class Tensors(ctypes.Structure):
    """kdalab_tensors_f64: the arrays of one call, by name. A field name it
    lacks is an AttributeError, not a Python attribute beside the struct that
    leaves the C field NULL."""
    __slots__ = ()
    _fields_ = [(n, _D) for n in ("q", "k", "v", "g", "beta", "h0", "o", "ht", "d_o", "dht",
                                  "dq", "dk", "dv", "dg", "dbeta", "dh0", "a", "b", "da", "db",
                                  "h")]


class Tensors32(ctypes.Structure):
    """kdalab_tensors_f32: the same arrays in float32."""
    __slots__ = ()
    _fields_ = [(n, ctypes.POINTER(ctypes.c_float)) for n, _ in Tensors._fields_]


_status = ctypes.c_int

lib.kdalab_last_error.restype = ctypes.c_char_p
lib.kdalab_strerror.restype = ctypes.c_char_p
lib.kdalab_strerror.argtypes = [_status]
lib.kdalab_chunk_opts_default.restype = ChunkOpts
lib.kdalab_simd_chunk_opts_default.restype = ChunkOpts
lib.kdalab_run_f64.restype = _status
lib.kdalab_run_f64.argtypes = [ctypes.POINTER(Call), ctypes.POINTER(Tensors), ctypes.c_void_p]
lib.kdalab_run_bwd_f64.restype = _status
lib.kdalab_run_bwd_f64.argtypes = [ctypes.POINTER(Call), ctypes.POINTER(Tensors)]
lib.kdalab_run_f32.restype = _status
lib.kdalab_run_f32.argtypes = [ctypes.POINTER(Call), ctypes.POINTER(Tensors32), ctypes.c_void_p]
lib.kdalab_run_bwd_f32.restype = _status
lib.kdalab_run_bwd_f32.argtypes = [ctypes.POINTER(Call), ctypes.POINTER(Tensors32)]
lib.kdalab_call_n_chunks.argtypes = [ctypes.POINTER(Call)]
lib.kdalab_call_n_chunks.restype = ctypes.c_size_t
lib.kdalab_workspace_new.restype = ctypes.c_void_p
lib.kdalab_workspace_new.argtypes = []
lib.kdalab_workspace_free.restype = None
lib.kdalab_workspace_free.argtypes = [ctypes.c_void_p]
lib.kdalab_workspace_bytes.restype = ctypes.c_size_t
lib.kdalab_workspace_bytes.argtypes = [ctypes.c_void_p]


class _Workspace:
    """One kdalab_workspace, freed with this object."""

    def __init__(self):
        self.ptr = lib.kdalab_workspace_new()
        if not self.ptr:
            raise MemoryError("kdalab_workspace_new: out of memory")

    def __del__(self, free=lib.kdalab_workspace_free):
        if getattr(self, "ptr", None):
            free(self.ptr)
            self.ptr = None


lib.kdalab_set_num_threads.restype = _status
lib.kdalab_set_num_threads.argtypes = [ctypes.c_int]
lib.kdalab_get_num_threads.restype = ctypes.c_int
lib.kdalab_get_num_threads.argtypes = []


def set_num_threads(n):
    """The threads every later kdalab call runs on (kdalab_set_num_threads):
    n from 1 to 1024, or 0 for OpenMP's own count (OMP_NUM_THREADS, or what another
    library set it to). The results are the same bits for any count. On
    import kdalab takes every CPU this process may run on
    (os.sched_getaffinity), unless OMP_NUM_THREADS is set: an imported
    PyTorch sets OpenMP's count to its own intra-op count (Debian's torch
    1.13 picks 1 on a machine of 2 CPUs), which would otherwise leave kdalab
    cores it could use."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) \
            or not 0 <= n < 2 ** 31:
        raise ValueError("set_num_threads: %r, expected an integer from 1 to 1024, or 0 for "
                         "OpenMP's own count" % (n,))
    check(lib.kdalab_set_num_threads(int(n)), "set_num_threads")


def get_num_threads():
    """The threads the next kdalab call runs on."""
    return lib.kdalab_get_num_threads()


_local = threading.local()


def workspace():
    """This thread's kdalab_workspace: the SIMD path's scratch, kept between
    calls so that a repeated call maps no fresh pages (one call at a time
    uses a workspace, so each thread has its own)."""
    w = getattr(_local, "work", None)
    if w is None:
        w = _local.work = _Workspace()
    return w.ptr


def release_workspace():
    """Free the calling thread's kdalab_workspace: the SIMD path's scratch,
    which a thread keeps between calls (so that a repeated call maps no
    fresh pages) at the size of its largest call, the backward's chunk
    states included (up to 128 MiB per thread a call runs on: 136 MB after
    one float64 backward at T = 8192, H = 4, K = V = 128 on 2 threads). The
    next call on the thread allocates it again. Other threads keep theirs;
    kdalab.testing.release_buffers() frees tolerance's. Returns the bytes
    freed."""
    w = getattr(_local, "work", None)
    _local.work = None
    return lib.kdalab_workspace_bytes(w.ptr) if w is not None else 0


_F = ctypes.POINTER(ctypes.c_float)
PRECISIONS = {"fp32": 0, "bf16": 1, "fp16": 2}
lib.kdalab_round_array.restype = _status
lib.kdalab_round_array.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
lib.kdalab_store_f64.restype = _status
lib.kdalab_store_f64.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                 ctypes.POINTER(ctypes.c_double)]
lib.kdalab_error_sums.restype = _status
lib.kdalab_error_sums.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                  ctypes.c_size_t, ctypes.c_void_p]
lib.kdalab_attention_f64.restype = _status
lib.kdalab_attention_f64.argtypes = [ctypes.POINTER(Dims), ctypes.c_double] + [_D] * 4
lib.kdalab_attention_bwd_f64.restype = _status
lib.kdalab_attention_bwd_f64.argtypes = [ctypes.POINTER(Dims), ctypes.c_double] + [_D] * 7
lib.kdalab_kda_gate_f64.restype = _status
lib.kdalab_kda_gate_f64.argtypes = [ctypes.c_size_t] * 3 + [_D] * 4
lib.kdalab_kda_gate_bwd_f64.restype = _status
lib.kdalab_kda_gate_bwd_f64.argtypes = [ctypes.c_size_t] * 3 + [_D] * 7
lib.kdalab_lower_bound_gate_f64.restype = _status
lib.kdalab_lower_bound_gate_f64.argtypes = [ctypes.c_size_t, ctypes.c_double, _D, _D]
lib.kdalab_lower_bound_gate_bwd_f64.restype = _status
lib.kdalab_lower_bound_gate_bwd_f64.argtypes = [ctypes.c_size_t, ctypes.c_double, _D, _D, _D]


class KdalabError(ValueError):
    """A kdalab call refused its input or overflowed; .status is the C status code."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def ptr(a):
    """A float64 (or float32) array's data pointer, or NULL for None."""
    if a is None:
        return None
    return a.ctypes.data_as(_F if a.dtype == np.float32 else _D)


def named(struct, **arrays):
    """A struct of named arrays (Tensors, Tensors32) from arrays of its
    precision or None (NULL), by field name."""
    return struct(**{name: ptr(a) for name, a in arrays.items()})


def check(status, what):
    """Raise for any status but OK; ERANGE (an overflow, outputs written) too."""
    if status != OK:
        detail = lib.kdalab_last_error().decode()
        name = lib.kdalab_strerror(status).decode()
        raise KdalabError(status, "%s: %s (%s)" % (what, name, detail))


def empty(shape):
    """A float64 array of zeros."""
    return np.zeros(shape, dtype=np.float64)


def output(shape):
    """A float64 array for an output the library writes in full (uninitialised:
    np.empty, which NumPy backs with huge pages when it is large, so a call
    takes a few page faults where zeroed memory takes one per 4 KB page)."""
    return np.empty(shape, dtype=np.float64)


class MechanismRow(ctypes.Structure):
    """kdalab_mechanism_info: one row of the mechanism table (lib/core/mechanisms.c)."""
    _fields_ = [("id", ctypes.c_int), ("name", ctypes.c_char_p), ("title", ctypes.c_char_p),
                ("delta", ctypes.c_int), ("g", ctypes.c_int), ("ab", ctypes.c_int),
                ("fla_chunk", ctypes.c_char_p),
                ("fla_recurrent", ctypes.c_char_p), ("source", ctypes.c_char_p)]


def check_layouts(library, path, mirrors):
    """Refuse a library whose public structs are not the size of this
    module's ctypes mirrors (kdalab_struct_size): a library built from other
    headers would be handed structs of the wrong layout. mirrors: (C name,
    ctypes class) pairs. Raises ImportError naming the struct, both sizes and
    the library's path."""
    size = getattr(library, "kdalab_struct_size", None)
    if size is None:
        raise ImportError(
            "kdalab: %s has no kdalab_struct_size: it was built from an older kdalab than "
            "this module; rebuild it (make lib) or reinstall the module" % path)
    size.restype = ctypes.c_size_t
    size.argtypes = [ctypes.c_char_p]
    for name, cls in mirrors:
        theirs, ours = size(name.encode()), ctypes.sizeof(cls)
        if theirs != ours:
            raise ImportError(
                "kdalab: %s was built with a %s of %d bytes, this module lays it out in %d: "
                "the library and the module come from different versions; rebuild the "
                "library (make lib) or reinstall the module" % (path, name, theirs, ours))


check_layouts(lib, LIBRARY_PATH, (
    ("kdalab_dims", Dims), ("kdalab_chunk_opts", ChunkOpts), ("kdalab_call", Call),
    ("kdalab_tensors_f64", Tensors), ("kdalab_tensors_f32", Tensors32),
    ("kdalab_mechanism_info", MechanismRow)))


lib.kdalab_mechanism_row.restype = ctypes.POINTER(MechanismRow)
lib.kdalab_mechanism_row.argtypes = [ctypes.c_int]
G_NONE, G_PER_HEAD, G_PER_KEY = 0, 1, 2  # kdalab_g_shape


def _rows():
    out, m = {}, 0
    while True:
        r = lib.kdalab_mechanism_row(m)
        if not r:
            return out
        r = r.contents
        out[r.name.decode()] = {"id": r.id, "delta": bool(r.delta), "g": r.g, "ab": bool(r.ab),
                                "fla_chunk": r.fla_chunk.decode(),
                                "fla_recurrent": r.fla_recurrent.decode(),
                                "title": r.title.decode(), "source": r.source.decode()}
        m += 1


# the mechanism table, read from the library: name -> its row's properties
TABLE = _rows()
MECHANISMS = {name: row["id"] for name, row in TABLE.items()}

def _omp_env_threads():
    """OMP_NUM_THREADS's first value ("4", or "4,2" for nested levels) when it
    is a positive integer, as OpenMP reads it; None for a value OpenMP
    ignores (empty, not a number) or none."""
    first = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) > 0 else None


# every CPU this process may run on, unless OMP_NUM_THREADS chooses (set_num_threads)
if _omp_env_threads() is None:
    set_num_threads(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                    else (os.cpu_count() or 1))
