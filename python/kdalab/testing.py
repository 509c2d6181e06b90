"""Comparing a kernel's output with the oracle's, in a kernel's test suite.

    from kdalab.testing import assert_close, tolerance
    tol = tolerance("kda", q, k, v, g, beta, initial_state=h0, precision="bf16")
    assert_close("o", o_ref, o_kernel, rtol=tol.rtol["o"])

errors() and assert_close() report both metrics: fla's (relative RMS,
||out - ref|| / ||ref||) and kdalab's (max |out - ref| / max |ref|), and
the index of the worst element. tolerance() derives a bound from the
arithmetic instead of a guess: the error kdalab's own emulation of the
storage precision makes at the caller's inputs (below); grad_tolerance()
does the same for every gradient of the chunkwise backward. Both keep their
buffers on the thread between calls (release_buffers() frees them).

As a pytest plugin (`pytest -p kdalab.testing`, or `pytest_plugins =
["kdalab.testing"]` in a conftest.py) this module gives the fixture
`kdalab_ref`: kdalab.torch's functions by fla's names (kdalab_ref.chunk_kda(...)),
with assert_close, errors, tolerance, grad_tolerance and release_buffers
beside them.
"""

import collections
import ctypes
import sys
import threading
import time

import numpy as np


def _rms(x, m):
    """sqrt(mean(x^2)) of a finite float64 x whose max |x| is m, without
    underflow or overflow in the squares: x is divided by m first, as BLAS's
    nrm2 scales, unless m is in [1e-100, 1e100], where no square of n
    elements can overflow and what underflows is below 1e-100 of the sum.
    Returns r with RMS = m * r, r in [1/sqrt(n), 1] (m = 0: 1)."""
    if m == 0:
        return 1.0
    x = x.reshape(-1)
    if not 1e-100 <= m <= 1e100:
        x = x / m
        return float(np.sqrt(np.dot(x, x) / x.size))
    return float(np.sqrt(np.dot(x, x) / x.size)) / m


def _ratio(num, den):
    """num / den for the metrics: 0 / 0 is 0 (both exact zeros), x / 0 is inf."""
    if num == 0:
        return 0.0
    return num / den if den > 0 else float("inf")


def errors(ref, out):
    """(fla's metric: relative RMS, ours: max |err| / max |ref|, the worst
    index). Both are computed without squaring raw values, so they hold for
    any magnitude a float64 holds (1e-300 as 1e300); a reference of zeros is
    matched only by zeros (any other candidate: inf); a non-finite candidate
    element is an infinite error; a non-finite reference is a ValueError."""
    from .ops import _first_index, as_f64
    ref = as_f64(ref, "ref")
    if not (type(out) is np.ndarray and out.dtype == np.float32 and out.ndim  # noqa: E721
            and out.flags.c_contiguous):  # a plain float32 array: exact in float64 as it is
        out = as_f64(out, "out")
    if ref.shape != out.shape:
        raise ValueError("shapes differ: ref %s, out %s" % (ref.shape, out.shape))
    if ref.size == 0:
        return 0.0, 0.0, ()
    hi, lo = float(ref.max()), float(ref.min())  # NaN propagates: one pass each
    if not (np.isfinite(hi) and np.isfinite(lo)):
        idx = _first_index(~np.isfinite(ref))
        raise ValueError("ref%s = %r: a reference must be finite" % (list(idx), ref[idx]))
    with np.errstate(over="ignore", invalid="ignore"):
        err = out - ref
        np.abs(err, out=err)
    at = int(np.argmax(err))  # the first largest, or the first NaN
    if not np.isfinite(err.flat[at]):  # a non-finite candidate: an infinite error
        err = np.where(np.isfinite(err), err, np.inf)
        at = int(np.argmax(err))
    worst = np.unravel_index(at, ref.shape)
    md, mr = float(err.flat[at]), max(hi, -lo)
    rms = _ratio(md, mr) * (_rms(err, md) / _rms(ref, mr)) if np.isfinite(md) else float("inf")
    return float(rms), float(_ratio(md, mr)), tuple(int(i) for i in worst)


# the axes of fla's arrays, by the array's name (assert_close's messages)
_AXES = {4: {"o": "bthv", "v": "bthv", "do": "bthv", "dv": "bthv",
             "q": "bthk", "k": "bthk", "dq": "bthk", "dk": "bthk", "g": "bthk", "dg": "bthk",
             "ht": "nhkv", "h0": "nhkv", "dh0": "nhkv", "dht": "nhkv"},
         3: {"beta": "bth", "dbeta": "bth", "g": "bth", "dg": "bth"},
         5: {"h": "bchkv"}}  # h, the state entering each chunk: c the chunk


def _axes(name, ndim):
    """Axis names for an array called name: fla's letters (b, t, h, k, v; n
    for a state's sequence, c for h's chunk), else i0, i1, ..."""
    letters = _AXES.get(ndim, {}).get(name)
    if letters is None and ndim == 4 and name.startswith("h["):  # one chunk's states, h[:, c]
        letters = "bhkv"
    return list(letters) if letters else ["i%d" % d for d in range(ndim)]


def _entering(j, t0, chunk_size):
    """What the state entering chunk j of a sequence that starts at t = t0 is:
    the initial state, or the one the positions of chunk j - 1 leave."""
    if j == 0:
        return "the initial state (t = %d)" % t0
    return "the state entering t = %d, left by positions t = %d..%d" % (
        t0 + j * chunk_size, t0 + (j - 1) * chunk_size, t0 + j * chunk_size - 1)


def _where(idx, axes, cu, chunk_size=64):
    """An index as "(b=0, t=17, h=1, v=3)", and with cu_seqlens where t is in
    its packed sequence: "; sequence 1, position 2 (it starts at t = 15)";
    for h's chunk axis c, chunks of chunk_size positions, which state it is
    ("; the state entering t = 192, left by positions t = 128..191"), with
    cu_seqlens in which sequence ("; sequence 1, its chunk 2 (its chunks
    start at c = 3): the state entering t = ..."), or that c is past the last
    sequence's chunks."""
    at = "(%s)" % ", ".join("%s=%d" % (a, i) for a, i in zip(axes, idx))
    if cu is not None and "t" in axes:
        t = idx[axes.index("t")]
        n = int(np.searchsorted(cu, t, side="right")) - 1
        if 0 <= n < len(cu) - 1:
            at += "; sequence %d, position %d (it starts at t = %d)" % (n, t - cu[n], cu[n])
    if "c" in axes:
        c = idx[axes.index("c")]
        if cu is None:
            return at + "; " + _entering(c, 0, chunk_size)
        first = np.concatenate(([0], np.cumsum(-(-np.diff(cu) // chunk_size))))
        n = int(np.searchsorted(first, c, side="right")) - 1
        if 0 <= n < len(cu) - 1:
            at += ("; sequence %d, its chunk %d of %d positions (its chunks start at c = %d): %s"
                   % (n, c - first[n], chunk_size, first[n],
                      _entering(c - first[n], int(cu[n]), chunk_size)))
        else:
            at += ("; past the %d chunks of %d positions that cu_seqlens makes"
                   % (first[-1], chunk_size))
    return at


def _chunk_note(axes, shape, cu, chunk_size, given):
    """For h (a chunk axis c), what its positions assume: "" when chunk_size
    was given and agrees with cu_seqlens; else a note that the positions
    take chunks of fla's 64 (chunk_size not given), or that h's chunk count
    is not the one cu_seqlens makes with chunk_size."""
    if "c" not in axes:
        return ""
    if cu is not None:
        made = int(np.sum(-(-np.diff(cu) // chunk_size)))
        if shape[axes.index("c")] != made:
            return ("; h has %d chunks where cu_seqlens makes %d of chunk_size = %d: pass "
                    "h's chunk_size" % (shape[axes.index("c")], made, chunk_size))
    if not given:
        return ("; the positions take h's chunks as fla's 64 (pass chunk_size= for h of "
                "another chunk)")
    return ""


def assert_close(name, ref, out, rtol=None, rms=None, cu_seqlens=None, chunk_size=None):
    """Fail unless max |out - ref| / max |ref| <= rtol (kdalab's metric) and,
    when rms is given, the relative RMS <= rms (fla's metric, its
    assert_close's ratio). The message gives both metrics, the worst element
    and, with rtol, the first element (row-major: the earliest b, then t)
    over rtol * max |ref|, each by its axes' names (fla's letters for the
    usual names: o (b, t, h, v), q, k (b, t, h, k), ht (n, h, k, v), ...),
    and with cu_seqlens (fla's packed sequences) the sequence and the
    position in it; for h (b, c, h, k, v), chunks of chunk_size positions,
    the positions whose state it is ("the state entering t = 192, left by
    positions t = 128..191") and with cu_seqlens the sequence and its chunk
    (one chunk's states named "h[...]" get the axes b, h, k, v); chunk_size
    None: fla's 64, said in the message, which also says when h's chunk
    count is not the one cu_seqlens makes with chunk_size. pytest shows the
    caller's line, not this function's. Returns (relative RMS, max relative
    error)."""
    __tracebackhide__ = True  # pytest: the failure is the caller's
    from .ops import _as_cu, _opts, as_f64, check_cu
    given = chunk_size is not None
    chunk_size = 64 if chunk_size is None else chunk_size  # None: fla's
    _opts(chunk_size)  # a positive integer (h's chunks), else a ValueError naming it
    if rtol is None and rms is None:
        raise TypeError("assert_close: give rtol (max error / max |ref|), rms (fla's relative "
                        "RMS) or both")
    ref = as_f64(ref, "ref")  # torch tensors (bf16, requiring grad) as NumPy float64
    out = as_f64(out, "out")
    cu = _as_cu(cu_seqlens)
    if cu is not None:  # as the library checks it: from 0, increasing, to T (if t is an axis)
        axes = _axes(name, ref.ndim)
        check_cu(cu, ref.shape[axes.index("t")] if "t" in axes else int(cu[-1]))
    r, rel_max, worst = errors(ref, out)
    bad = ["%s = %.3g > %s %.3g" % (what, got, arg, tol) for what, got, arg, tol in
           (("max error / max |ref|", rel_max, "rtol", rtol), ("relative RMS", r, "rms", rms))
           if tol is not None and not got <= tol]
    if bad:
        axes = _axes(name, ref.ndim)
        at = "worst at %s: ref %r, out %r" % (_where(worst, axes, cu, chunk_size),
                                              float(ref[worst]), float(out[worst]))
        if rtol is not None and rel_max > rtol:
            with np.errstate(invalid="ignore", over="ignore"):
                over = ~(np.abs(out - ref) <= rtol * np.abs(ref).max())
            first = tuple(int(i) for i in np.argwhere(over)[0])
            at = "first over rtol at %s: ref %r, out %r; %s" % (
                _where(first, axes, cu, chunk_size), float(ref[first]), float(out[first]), at)
        raise AssertionError("%s: %s (max error / max |ref| %.3g, relative RMS %.3g); %s%s" % (
            name, ", ".join(bad), rel_max, r, at,
            _chunk_note(axes, ref.shape, cu, chunk_size, given)))
    return r, rel_max


# ---- a tolerance from the arithmetic -----------------------------------------------

Tolerance = collections.namedtuple("Tolerance", ["rtol", "rms", "trials"])
_UNIT = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11, "fp32": 2.0 ** -24}
# the largest finite value of each storage format (bf16: float32's exponent
# with an 8-bit mantissa; fp16: IEEE half)
_MAX = {"bf16": float.fromhex("0x1.fep127"), "fp16": 65504.0,
        "fp32": float(np.finfo(np.float32).max)}


def _check_range(arrays, precision, peaks, jitter=True, what="tolerance"):
    """Every input stored in the format must fit it: a value the emulation
    would store as inf (rounded to float32, then to the format, as
    kdalab_store_f64 does), with jitter after the largest perturbation a
    trial applies (times 1 + 2^-8), is a ValueError naming the input, its
    index and value (never the emulation's inf). arrays: (name, array or
    None) pairs; peaks: each array's largest magnitude, as _store found it
    while copying it (the array itself is read only to name the first
    element that does not fit)."""
    factor = 1 + max(_UNIT.values()) if jitter else 1.0
    pairs = [(name, a, m) for (name, a), m in zip(arrays, peaks) if a is not None and a.size]

    def inf_when_stored(x):
        with np.errstate(over="ignore"):
            return np.isinf(_store(np.abs(x) * factor, precision)[0])
    for name, a, m in pairs:
        if inf_when_stored(np.array([m])).any():  # the largest is: find the first
            from .ops import _first_index
            idx = _first_index(inf_when_stored(a))
            raise ValueError("%s: %s%s = %.6g does not fit %s (largest finite %.6g%s): a kernel "
                             "that stores it so holds inf there, which kdalab cannot emulate"
                             % (what, name, list(idx), a[idx], precision, _MAX[precision],
                                "; times 1 + 2^-8, the largest perturbation of a trial after "
                                "the first" if jitter else ""))


_kept = threading.local()  # this thread's buffers, by role (_buffer)

# the most a thread keeps between calls (tolerance kept 111 MB at B = 2,
# T = 2048, H = 4, K = V = 128, grad_tolerance with its 8 trials 211 MB
# more)
_KEEP_BYTES = 1 << 30


def _new_call():
    """Mark the start of a tolerance or grad_tolerance call on this thread:
    the buffers it takes are this call's (_buffer never evicts them). When
    the previous call had to take fresh arrays beyond the budget, its
    buffers larger than it needed go first, so that a repeated call whose
    own needs fit the budget takes its buffers exact once and then finds
    them all."""
    pool = getattr(_kept, "pool", None) or {}
    if getattr(_kept, "over", False):
        for role in [r for r, e in pool.items() if e[0].size > e[2]]:
            del pool[role]
    _kept.over = False
    _kept.call = getattr(_kept, "call", 0) + 1


def _buffer(role, shape, dtype=np.float32):
    """An uninitialised array of shape and dtype for `role` (one array at a
    time per role), a view of a buffer this thread keeps between calls of
    tolerance and grad_tolerance, grown when too small: a fresh array maps
    fresh pages, and the kernel's zeroing of the ~100 MB a tolerance call
    takes at B = 2, T = 2048, H = 4, K = V = 128 cost 0.3x the oracle's
    forward (bench/README.md). The thread keeps at most _KEEP_BYTES: to
    make room, the buffers of the roles used longest ago by an earlier call
    go first; what still does not fit is a fresh array of this call alone
    (and _new_call trims the next call's). release_buffers() frees them
    all."""
    pool = getattr(_kept, "pool", None)
    if pool is None:
        pool = _kept.pool = {}  # role -> [buffer, the call that last took it, bytes taken]
    now = getattr(_kept, "call", 0)
    n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    entry = pool.get(role)
    if n == 0:
        return np.empty(shape, dtype=dtype)
    if entry is None or entry[0].size < n:
        pool.pop(role, None)  # the smaller one goes before a larger one is taken
        kept = sum(e[0].size for e in pool.values())
        for old in sorted((e[1], r) for r, e in pool.items() if e[1] < now):
            if kept + n <= _KEEP_BYTES:
                break
            kept -= pool.pop(old[1])[0].size
        if kept + n > _KEEP_BYTES:
            _kept.over = True
            return np.empty(shape, dtype=dtype)
        entry = pool[role] = [np.empty(n, dtype=np.uint8), now, n]
    entry[1], entry[2] = now, n
    return entry[0][:n].view(dtype).reshape(shape)


def release_buffers():
    """Free the buffers tolerance() and grad_tolerance() keep on the calling
    thread between calls so that a repeated call maps no fresh pages: the
    inputs' float32 copies, the emulation's and the oracle's outputs, and
    with trials > 1 each trial's perturbed inputs and the perturbation's
    factors (at B = 2, T = 2048, H = 4, K = V = 128: 111 MB after
    tolerance, about 320 MB after grad_tolerance too with its default 8
    trials, a few MB more with initial_state and dht).
    A thread keeps at most 1 GiB (the roles used longest ago make room for
    a new call's), and only its own: each thread of a pool that runs them
    keeps its own, freed when the thread ends or by release_buffers() in
    that thread. The next call allocates them again. Returns the bytes
    freed."""
    pool = getattr(_kept, "pool", None) or {}
    freed = sum(e[0].size for e in pool.values())
    _kept.pool = {}
    return freed


def _to_f32(arrays, role):
    """Each array (or None) as contiguous float32 (_store's "fp32") in this
    thread's buffers (_buffer(role + index)), with its largest magnitude
    (None for None)."""
    out = []
    for i, a in enumerate(arrays):
        if a is None:
            out.append((None, None))
        else:
            out.append(_store(a, "fp32", _buffer("%s%d" % (role, i), np.shape(a))))
    return [c for c, _ in out], [m for _, m in out]


_INPUTS = ("q", "k", "v", "g", "beta", "initial_state", "a", "b")  # _emulate's x, by name
_STORED = (0, 1, 2, 4, 6, 7)  # _INPUTS stored in the format; g and the state in float32


def _check_inputs(names, stored, x, peaks, precision, jitter, what):
    """_check_range over an emulation's inputs x (named by names): those at
    the indices `stored` against the format, the others (the log-decay, the
    states) against float32, with the largest magnitudes (peaks) their
    stored copies found."""
    for fmt, idx in ((precision, stored),
                     ("fp32", [i for i in range(len(x)) if i not in stored])):
        _check_range([(names[i], x[i]) for i in idx], fmt, [peaks[i] for i in idx],
                     jitter=jitter, what=what)


def _emulate(call, x, scale, precision, chunk_size, states=True, check=None):
    """The float32 chunkwise forward with emulated `precision` storage
    (kdalab_run_f32 on the SIMD path: inputs and the rescaled q, k rounded to
    the format, float32 sums; its error within ~10 % of the reference
    emulation's, tests/test_simd_store.c) on x = (q, k, v, g, beta, h0, a, b),
    any layout the call has (varlen, GVA): (o, ht, h) in float32 (errors()
    takes them as they are; o stored in the format, unchecked: the caller's
    _fast_errors(..., stored=) checks it), h the state entering each chunk
    of chunk_size [B, NT, HV, K, V] (None unless states); the inputs'
    float32 copies, o, ht and h in this thread's buffers (_buffer: each call
    overwrites them).
    check: None, or first check that x's inputs fit their formats
    (_check_range, with the largest magnitudes their float32 copies found;
    check=True: after the trials' perturbation, False: as they are)."""
    from . import _lib, ops
    f, peaks = _to_f32(x, "input")
    if check is not None:
        _check_inputs(_INPUTS, _STORED, x, peaks, precision, check, "tolerance")
    o, ht = _buffer("o", x[2].shape), _buffer("ht", call.state_shape())
    opts = _lib.lib.kdalab_chunk_opts_default()
    opts.chunk, opts.precision = chunk_size, _lib.PRECISIONS[precision]
    c = call.call(_lib.FORM_CHUNK, _lib.IMPLS["simd"], scale, opts)
    h = _buffer("h", (call.B, _lib.lib.kdalab_call_n_chunks(c)) + call.state_shape()[1:]) \
        if states else None
    arrays = _lib.named(_lib.Tensors32, q=f[0], k=f[1], v=f[2], g=f[3], beta=f[4], h0=f[5],
                        a=f[6], b=f[7], o=o, ht=ht, h=h)
    _lib.check(_lib.lib.kdalab_run_f32(c, arrays, None),
               "tolerance: the %s emulation" % precision)
    # o as the kernel returns it; its overflow is checked with the metrics
    _store_output(o, "o", precision, "tolerance", check=False)
    return o, ht, h


_BLOCK = 1 << 16  # elements per block of kdalab_error_sums for one array: the threads share them


def _block_sums(ref, got, block):
    """kdalab_error_sums of a float64 ref and a float32 got of one shape
    (copied where not C-contiguous in those types): [ceil(n / block), 4] rows of (max |got - ref|,
    max |ref|, sum (got - ref)^2, sum ref^2), one pass over each array
    where errors() makes several over whole-array temporaries."""
    from . import _lib
    ref, got = np.ascontiguousarray(ref, np.float64), np.ascontiguousarray(got, np.float32)
    n = ref.size
    sums = np.empty((-(-n // block), 4))
    _lib.check(_lib.lib.kdalab_error_sums(ref.ctypes.data, got.ctypes.data, n, block,
                                          sums.ctypes.data), "kdalab.testing: the error sums")
    return sums


def _from_sums(md, mr, e2, r2, ref, got):
    """(rms, rel) as errors() gives them, from one set's sums; errors()
    itself where a sum of squares is not finite or leaves float64's range
    (its careful metric)."""
    if not (np.isfinite(e2) and np.isfinite(r2) and (r2 > 0 or md == 0)) or (0 < r2 < 1e-290):
        return errors(ref, got)[:2]
    return (float(np.sqrt(e2 / r2)) if md else 0.0), _ratio(md, mr)


def _fast_errors(ref, got, stored=None):
    """errors(ref, got)[:2], (rms, rel), through kdalab_error_sums: for the
    tolerances' outputs, which the library has checked finite. stored: got's
    (name, precision, what) when _store_output rounded it unchecked: a sum
    that is not finite then checks got first (its ValueError)."""
    sums = _block_sums(ref, got, _BLOCK)
    if stored is not None and not np.isfinite(sums).all():
        _check_stored(got, *stored)
    md, mr = (float(x) for x in sums[:, :2].max(axis=0, initial=0.0))
    e2, r2 = (float(x) for x in sums[:, 2:].sum(axis=0))
    return _from_sums(md, mr, e2, r2, ref, got)


def _state_errors(ref_h, got_h, ref_ht, got_ht):
    """(rms, rel) of the worst of the states a chunkwise forward carries: the
    state entering each chunk (h [B, NT, HV, K, V], ref float64, got float32)
    and the final ones (ht [N, HV, K, V]). Each is a set of states, those of
    one chunk index (h[:, c]) or ht, measured as errors() measures ht: max
    |err| / max |ref| and the RMS ratio over the set; the largest of each
    over the sets (chunk 0's without an initial state: zero, and zero
    error)."""
    rms, rel = _fast_errors(ref_ht, got_ht)
    B, NT = ref_h.shape[:2]
    if not ref_h.size:
        return rms, rel
    sums = _block_sums(ref_h, got_h, ref_h[0, 0].size).reshape(B, NT, 4)  # one per (b, c)
    m, e = sums[..., :2].max(axis=0), sums[..., 2:].sum(axis=0)  # [NT, 2] each
    for c in range(NT):
        if m[c, 0] == 0 and np.isfinite(e[c, 0]):
            continue
        q, r = _from_sums(m[c, 0], m[c, 1], e[c, 0], e[c, 1], ref_h[:, c], got_h[:, c])
        rel, rms = max(rel, r), max(rms, q)
    return rms, rel


# trials=None: enough trials that each output's errors are sampled at
# _SAMPLE elements in all, within [1, 8]. The largest error of one trial is a
# noisy statistic: over 8 trials it reached 1.3-2.1x the first trial's with
# 2^14-2^17 elements of ht alone (KDA, bf16, K = V = 128), so one trial is
# left to outputs of 2^20 elements and more, where it moved by at most 1.45x
# in the inputs first measured and 1.59x in 6 more (KDA, bf16 and fp16, o of
# 2^20 and 2^21 elements); the spread does not shrink much with the size, so
# margin = 2 is what covers it. The states are sampled at every chunk start as
# well as at the end (_state_errors): at B = 2, T = 2048, H = 4, K = V = 128
# (32 sets of 2^17 elements), KDA, 6 inputs in bf16 and 3 in fp16, the largest
# of 8 trials was 1.00-1.35x the first, and the first 0.86-1.42x what 8 trials
# of ht alone gave
_SAMPLE = 2 ** 20

# tolerance samples the states at every chunk start while they are at most
# this many times o's elements: h has K / chunk_size times o's elements in a
# plain batch, so 4 keeps fla's chunks of 64 at K <= 256, and a small chunk
# size (whose h would be large and whose oracle slow: at chunk_size = 1,
# T = 2048, 864 MB and 1.5x the time of the final states alone) falls back
# to the final states
_STATES_PER_O = 4


def _trials(trials, n_o, n_ht):
    """The trial count: trials, or for None ceil(_SAMPLE / the smaller of
    the sizes sampled, n_o and n_ht) within [1, 8]."""
    if trials is not None:
        return int(trials)
    return int(min(8, max(1, -(-_SAMPLE // max(min(n_o, n_ht), 1)))))


def _check_chunk(chunk_size):
    """chunk_size, the emulated kernel's chunk: a positive integer (None is
    no chunk a kernel has); a ValueError naming it otherwise, before anything
    runs."""
    from . import ops
    if chunk_size is None:
        raise ValueError("chunk_size: None, expected the emulated kernel's chunk, a positive "
                         "integer (fla's kernels: 64)")
    ops._opts(chunk_size)


def _check_trial_args(mech, precision, trials, margin):
    """tolerance's and grad_tolerance's own arguments: a row of the mechanism
    table, a storage format, trials None or >= 1, a finite margin >= 1
    (returned as a float); a ValueError naming the argument otherwise."""
    from . import _lib, ops
    if mech not in _lib.MECHANISMS:
        raise ValueError("mech: %r, expected one of %s" % (mech, sorted(_lib.MECHANISMS)))
    if precision not in _UNIT:
        raise ValueError("precision: %r, expected one of %s" % (precision, sorted(_UNIT)))
    if trials is not None and (isinstance(trials, (bool, np.bool_)) or
                               not isinstance(trials, (int, np.integer)) or trials < 1):
        raise ValueError("trials: %r, expected None (as many as the size needs) or an "
                         "integer >= 1 (trial 0 is the unperturbed run)" % (trials,))
    margin = ops._real("margin", margin)
    if not 1 <= margin < float("inf"):
        raise ValueError("margin: %r, expected a finite factor >= 1 (the bound is the "
                         "emulation's largest error times margin)" % (margin,))
    return margin


def _run_trials(what, run_one, arrays, trials, rng, precision):
    """run_one(x) for each trial's inputs x (each array of `arrays` times
    1 + u * unit roundoff, u uniform in [-1, 1); trial 0 the arrays
    themselves), one trial after another (each run spreads over the cores
    in the C library), drawn in trial order so that the seed decides them:
    the results in trial order. The first trial to fail raises its error.
    When the trials will take more than a few seconds it says so on stderr,
    with their cost and progress. The factors 1 + u * unit roundoff are
    drawn once, twice as many as the largest array has elements, and each
    array of each trial takes a window of them at a random offset (drawing
    fresh ones for every element of every trial cost as much as the
    emulation)."""
    n = max((a.size for a in arrays if a is not None), default=0)
    factors = None
    if trials > 1 and n:
        factors = rng.random(dtype=np.float32 if precision != "fp32" else np.float64,
                             out=_buffer("factors", (2 * n,),
                                         np.float32 if precision != "fp32" else np.float64))
        factors *= 2 * _UNIT[precision]
        factors += 1 - _UNIT[precision]

    def jitter(i, a):  # a * (1 + u * unit roundoff) on a window of the factors
        if factors is None:  # every array is empty: nothing to jitter
            return a
        at = int(rng.integers(0, factors.size - a.size + 1))
        return np.multiply(a, factors[at:at + a.size].reshape(a.shape),  # written over by the next
                           out=_buffer("trial%d" % i, a.shape, a.dtype))

    t0, out = time.perf_counter(), []
    for trial in range(trials):
        x = arrays if trial == 0 else [None if a is None else jitter(i, a)
                                       for i, a in enumerate(arrays)]
        out.append(run_one(x))
        spent = time.perf_counter() - t0
        left = spent / len(out) * (trials - len(out))
        if spent + left > 5 and len(out) < trials:
            sys.stderr.write("kdalab.testing.%s: %d of %d trials in %.1f s, about %.0f s left "
                             "(each runs the float64 oracle and kdalab's float32 emulation "
                             "of the storage)\n" % (what, len(out), trials, spent, left))
    return out


def tolerance(mech, q, k, v, g=None, beta=None, initial_state=None, scale=None,
              precision="bf16", chunk_size=64, trials=None, margin=2.0, seed=0,
              cu_seqlens=None, a=None, b=None):
    """Tolerances for a kernel that stores in `precision` ("bf16", "fp16",
    "fp32") at these inputs, from kdalab's own emulation (kdalab_run_f32 on
    the SIMD path: inputs and the rescaled q, k rounded to the format,
    float32 sums, chunks of chunk_size; o rounded to the format as the kernel
    returns it, in v's dtype as fla does; the states kept in float32) against
    the float64 oracle: in
    `trials` runs at the caller's inputs, each input multiplied by
    (1 + u * unit roundoff) with uniform u in [-1, 1) (trial 0 unperturbed)
    so that every rounding decision varies, the largest error of each output,
    times `margin`. The states are measured where the emulated kernel holds
    them: at the start of every chunk (fla's h, return_intermediate_states)
    and at the end, each set of states against its own largest value; "ht"
    bounds them all, so it also checks a kernel's h (assert_close's metrics
    over a whole h never exceed the worst set's). trials=None: as many as
    sample 2^20 elements of o and 2^20 of the states over the trials, within
    [1, 8] (the smaller of the two decides): the
    states count B * NT * HV * K * V elements, NT the chunks of chunk_size
    (kdalab_call_n_chunks; with cu_seqlens each sequence's, summed), while
    that is at most 4x o's elements (K / chunk_size <= 4 in a plain batch);
    beyond, the final states alone are sampled (one trial's largest error
    is noisy: over 8 trials o's reached up to 1.6x the first's at 2^20
    elements; the states', sampled at 32 chunk starts, 1.35x).

    Its cost: per trial one float64 oracle forward at its own C = 16 (where
    16 divides chunk_size; else at chunk_size) that writes the states every
    chunk_size positions (kdalab_chunk_opts.h_chunk), one emulation (about
    0.7x of it, with the float32 copies of the inputs) and the metrics
    (kdalab_error_sums): at B = 2, T = 2048, H = 4, K = V = 128 on 2 cores,
    2.0x the oracle's forward when the call is repeated on a thread
    (bench/README.md). Its memory: h in float64 and float32, 12 bytes per
    state element sampled, beside o's and the inputs' copies (and with
    trials > 1 each trial's perturbed inputs), kept on the thread for the
    next call (release_buffers()): the first call on a thread maps them
    fresh, about 1.3x a repeated call's time at that size.

    mech is a row of the mechanism table (kdalab._lib.TABLE: "kda",
    "gated_deltanet", "deltanet", "linear_attention", "gla", "simple_gla",
    "dplr" with its a, b [B, T, HV, K], stored in the format as q, k are);
    inputs as the NumPy functions take them after any in-kernel step;
    cu_seqlens (B = 1, sequences packed along T, initial_state [N, HV, K, V])
    as in fla: each sequence is emulated on its own, the bound covers all of
    them. Returns Tolerance(rtol={"o", "ht", "h"}, rms={"o", "ht", "h"},
    trials=[(rtol, rms) of o per trial]): "ht" the states' bound in float32
    (fla's final state), "h" the same states stored in the format as fla
    stores h (the states' bound b plus one rounding of each element:
    b + u (1 + b), u the format's unit roundoff; for fp16 states below its
    normal range, 6.1e-5, the rounding is absolute and not covered); for
    assert_close(..., rtol=tol.rtol["o"], rms=tol.rms["o"]). A forward
    bound: grad_tolerance bounds the gradients."""
    from . import ops
    from . import _lib
    margin = _check_trial_args(mech, precision, trials, margin)
    _new_call()
    q, k, v = (ops.as_f64(x, n, 4) for x, n in ((q, "q"), (k, "k"), (v, "v")))
    g, beta, h0, a, b = (ops.as_f64(x, n, required=False) for x, n in (
        (g, "g"), (beta, "beta"), (initial_state, "initial_state"), (a, "a"), (b, "b")))
    cu = ops._as_cu(cu_seqlens)
    call = ops._Call(mech, q, k, v, g, beta, h0, cu, a=a, b=b)
    _check_chunk(chunk_size)
    # q, k, v, beta (a, b) are stored in the format; the log-decay and the
    # state stay in float32 (kdalab_run_f32's emulation, as production kernels
    # keep them)
    s = ops._real("scale", scale) if scale is not None else call.K ** -0.5

    # the states sampled: those entering every chunk but a sequence's first,
    # and the final ones, as many elements as h has; only while h is at most
    # _STATES_PER_O times o's size (K / chunk_size <= 4 in a plain batch),
    # else the final states alone
    nt = _lib.lib.kdalab_call_n_chunks(call.call(_lib.FORM_CHUNK, _lib.IMPLS["simd"], s,
                                                 ops._opts(chunk_size)))
    n_o = call.B * call.T * call.HV * call.V
    n_states = call.B * nt * call.HV * call.K * call.V
    sample = n_states <= _STATES_PER_O * n_o
    if not sample:
        n_states = int(np.prod(call.state_shape()))

    args = (q, k, v, g, beta, h0, a, b)

    def one(x):  # a bad cu_seqlens is the library's error, raised by the first trial
        # the emulation first: the inputs' range is checked on the first trial's
        # float32 copies (the others are within one unit roundoff of them:
        # _check_range's limit), before the oracle meets an input out of range
        eo, eht, eh = _emulate(call, x, s, precision, chunk_size, states=sample,
                               check=trials > 1 if x is args else None)
        # the oracle at its fastest chunk that divides the kernel's (its o and
        # ht do not depend on it), with the states entering the kernel's chunks
        # (ops._h_opts)
        ro, rht, *rh = ops._forward(mech, 1, *x[:5], s, x[5], True, cu, None, a=x[6],
                                    b=x[7], states=sample, h_chunk=chunk_size,
                                    alloc=_ref_out)
        st = _state_errors(rh[0], eh, rht, eht) if sample else _fast_errors(rht, eht)
        return [_fast_errors(ro, eo, stored=("o", precision, "tolerance")), st]

    worst = {"o": [0.0, 0.0], "ht": [0.0, 0.0]}
    per_trial = []
    trials = _trials(trials, n_o, n_states)
    for res in _run_trials("tolerance", one, args, trials,
                           np.random.default_rng(seed), precision):
        for name, (rms, rel) in zip(("o", "ht"), res):
            worst[name] = [max(worst[name][0], rel), max(worst[name][1], rms)]
        per_trial.append((res[0][1], res[0][0]))
    rtol = {n: margin * w[0] for n, w in worst.items()}
    rms = {n: margin * w[1] for n, w in worst.items()}
    # h, stored in the format (as fla stores it): the states' bound and one
    # rounding of each element, |round(x) - x| <= u |x| with
    # |x| <= |ref| (1 + the states' error), for both metrics
    u = _UNIT[precision]
    rtol["h"], rms["h"] = (b + u * (1 + b) for b in (rtol["ht"], rms["ht"]))
    return Tolerance(rtol, rms, per_trial)


def _store_output(x, name, precision, what, check=True):
    """A float32 output of an emulation, x, rounded in place to the storage
    format, as a kernel storing in `precision` returns it (fla returns o, dq,
    dk, dv, dbeta in the inputs' dtype); with check, a value beyond the
    format's range is a ValueError naming it (such a kernel's output would be
    infinite); without, the caller checks (_fast_errors' stored)."""
    from . import _lib
    _lib.check(_lib.lib.kdalab_round_array(_lib.PRECISIONS[precision], x.ctypes.data, x.size),
               "%s: storing %s in %s" % (what, name, precision))
    if check:
        _check_stored(x, name, precision, what)


def _check_stored(x, name, precision, what):
    """_store_output's check: x, stored in `precision`, holds no inf (the
    library's outputs are finite, so an inf is the storage's overflow)."""
    if precision != "fp32" and x.size and not (np.isfinite(x.max()) and np.isfinite(x.min())):
        raise ValueError("%s: %s reaches beyond %s's range (%.6g) at these inputs: a kernel "
                         "storing it in %s overflows" % (what, name, precision, _MAX[precision],
                                                         precision))


def _store(a, precision, out=None):
    """(a as a kernel storing it in `precision` holds it, max |a|): rounded
    to float32, then to the format (kdalab_store_f64: round to nearest even,
    beyond float32's range inf, which the library refuses), as contiguous
    float32 into out (a float32 array of a's shape, reused) or a new array;
    its largest magnitude read on the way."""
    from . import _lib
    a = np.ascontiguousarray(a, dtype=np.float64)
    if out is None or out.shape != a.shape:
        out = np.empty(a.shape, dtype=np.float32)
    peak = ctypes.c_double()
    _lib.check(_lib.lib.kdalab_store_f64(_lib.PRECISIONS[precision], a.ctypes.data,
                                         out.ctypes.data, a.size, ctypes.byref(peak)),
               "storing in %s" % precision)
    return out, peak.value


def _ref_out(name, shape):
    """The float64 oracle's output `name` in this thread's buffers (ops'
    alloc=: the oracle writes all of it)."""
    return _buffer("ref_" + name, shape, np.float64)


_GRAD_INPUTS = ("q", "k", "v", "g", "beta", "initial_state", "do", "dht", "a", "b")
_GRAD_STORED = (0, 1, 2, 4, 6, 8, 9)  # _GRAD_INPUTS stored in the format; the rest in float32


def _emulate_bwd(call, mech, x, scale, precision, chunk_size, check=None):
    """The float32 chunkwise backward (kdalab_run_bwd_f32 on the SIMD path,
    which computes the reference's gradients in float32) on x = (q, k, v, g,
    beta, h0, do, dht, a, b) with q, k, v, beta, do, a and b stored in
    `precision` and g, h0, dht in float32: the gradients in float32 (errors()
    takes them as they are), by name; the stored inputs and the gradients in
    this thread's buffers (_buffer: each call overwrites them).
    check: None, or first check that x's inputs fit their formats
    (_check_range, with the largest magnitudes their stored copies found;
    check=True: after the trials' perturbation, False: as they are)."""
    from . import _lib, ops
    q, k, v, g, beta, h0, do, dht, a, b = x
    stored = [(None, None) if y is None else
              _store(y, precision if i in _GRAD_STORED else "fp32",
                     _buffer("input%d" % i, np.shape(y)))
              for i, y in enumerate(x)]
    st = [y for y, _ in stored]
    if check is not None:
        _check_inputs(_GRAD_INPUTS, _GRAD_STORED, x, [m for _, m in stored], precision, check,
                      "grad_tolerance")
    out = {"dq": q.shape, "dk": k.shape, "dv": v.shape, "dh0": call.state_shape()}
    for name, y in (("dg", g), ("dbeta", beta), ("da", a), ("db", b)):
        if y is not None:
            out[name] = y.shape
    grads = {}
    for n, shape in out.items():
        grads[n] = _buffer(n, shape)
        grads[n].fill(0)
    arrays = _lib.named(_lib.Tensors32, q=st[0], k=st[1], v=st[2], g=st[3], beta=st[4],
                        h0=st[5], d_o=st[6], dht=st[7], a=st[8], b=st[9], **grads)
    c = call.call(_lib.FORM_CHUNK, _lib.IMPLS["simd"], scale, ops._opts(chunk_size))
    _lib.check(_lib.lib.kdalab_run_bwd_f32(c, arrays),
               "grad_tolerance: the %s emulation" % precision)
    for name in ("dq", "dk", "dv", "dbeta", "da", "db"):  # stored like their inputs
        if name in grads:
            _store_output(grads[name], name, precision, "grad_tolerance")
    return grads


def grad_tolerance(mech, q, k, v, g=None, beta=None, do=None, dht=None, initial_state=None,
                   scale=None, precision="bf16", chunk_size=64, trials=None, margin=2.0, seed=0,
                   cu_seqlens=None, a=None, b=None):
    """Tolerances for every gradient of a chunkwise backward that stores in
    `precision` ("bf16", "fp16", "fp32"), derived as tolerance() derives the
    forward's: in `trials` runs at the caller's inputs (each, and do, dht,
    multiplied by 1 + u * unit roundoff, u uniform in [-1, 1); trial 0
    unperturbed; None: as tolerance's, with the smaller of dh0's size and
    B * T * HV, one value per position, in ht's place), the float32 backward
    (kdalab_run_bwd_f32 on the SIMD path, chunks of chunk_size) with q, k, v, beta and do
    stored in the format — g, initial_state and dht in float32, as the
    forward's emulation keeps them — and each gradient returned as its input
    is stored (dq, dk, dv, dbeta, da, db rounded to the format; dg, dh0 in
    float32), against the float64 backward at the same inputs (the SIMD
    path at its own chunk of 16: its gradients do not depend on the chunk);
    the largest error of each gradient, times `margin`. Its cost at B = 2,
    T = 2048, H = 4, K = V = 128 on 2 cores: 2.1 s with its 8 trials, 14x
    the oracle's backward; 0.25 s, 1.7x, with one (bench/README.md).

    What it covers: storage of the inputs, of the output's gradient and of
    the gradients returned, and float32 arithmetic. What it does not: a kernel that also stores the
    backward's intermediates (the chunk states, the rescaled q, k) in the
    format rounds more often than this emulation; raise margin for it.

    Arguments as tolerance()'s, plus do [B, T, HV, V] (required) and dht
    [N, HV, K, V] (None: zero). Returns Tolerance(rtol={name: bound},
    rms={name: bound}, trials=[{name: (rtol, rms)} per trial]) over the
    gradients the mechanism has: dq, dk, dv, dh0, and dg, dbeta, da, db where
    it has g, beta, a and b (stored in the format as q, k are); for
    assert_close(name, ref, out, rtol=tol.rtol[name], rms=tol.rms[name]).
    Its buffers are kept on the thread for the next call, as tolerance's
    are (release_buffers())."""
    from . import ops
    from . import _lib
    margin = _check_trial_args(mech, precision, trials, margin)
    _new_call()
    _check_chunk(chunk_size)
    if do is None:
        raise ValueError("do is required: the gradient of the output [B, T, HV, V]")
    q, k, v, do = (ops.as_f64(x, n, 4) for x, n in ((q, "q"), (k, "k"), (v, "v"), (do, "do")))
    g, beta, h0, dht, a, b = (ops.as_f64(x, n, required=False) for x, n in (
        (g, "g"), (beta, "beta"), (initial_state, "initial_state"), (dht, "dht"), (a, "a"),
        (b, "b")))
    cu = ops._as_cu(cu_seqlens)
    call = ops._Call(mech, q, k, v, g, beta, h0, cu, a=a, b=b)
    ops._expect("do", do, (call.B, call.T, call.HV, call.V))
    ops._expect("dht", dht, call.state_shape())
    # the gradients' smallest: a state (dh0), or one value per position (dbeta)
    trials = _trials(trials, call.B * call.T * call.HV * call.V,
                     min(int(np.prod(call.state_shape())), call.B * call.T * call.HV))
    s = ops._real("scale", scale) if scale is not None else call.K ** -0.5
    args = (q, k, v, g, beta, h0, do, dht, a, b)

    def one(x):
        # the emulation first: the inputs' range is checked on the first trial's
        # stored copies (the others are within one unit roundoff of them:
        # _check_range's limit), before the oracle meets an input out of range
        got = _emulate_bwd(call, mech, x, s, precision, chunk_size,
                           check=trials > 1 if x is args else None)
        # the float64 backward (the SIMD path: the reference's gradients to ~1e-14,
        # far inside any bound here) at its own default chunk (16: its gradients
        # do not depend on it, and at 64 it takes 1.5x as long); a zero initial
        # state stands for none, so that dh0 comes back too
        h0z = x[5] if x[5] is not None else np.zeros(call.state_shape())
        ref = ops._backward(mech, _lib.FORM_CHUNK, *x[:5], x[6], x[7], s, h0z, cu,
                            None, a=x[8], b=x[9], alloc=_ref_out)._asdict()
        return {name: _fast_errors(ref[name], o)[::-1] for name, o in got.items()}  # (rel, rms)

    worst, per_trial = {}, []
    for this in _run_trials("grad_tolerance", one, args,
                            trials, np.random.default_rng(seed), precision):
        for name, (rel, rms) in this.items():
            w = worst.setdefault(name, [0.0, 0.0])
            worst[name] = [max(w[0], rel), max(w[1], rms)]
        per_trial.append(this)
    return Tolerance({n: margin * w[0] for n, w in worst.items()},
                     {n: margin * w[1] for n, w in worst.items()}, per_trial)


# ---- the pytest plugin ------------------------------------------------------------

class Reference:
    """The kdalab_ref fixture: kdalab.torch's functions by fla's names, and
    assert_close, errors, tolerance, grad_tolerance, release_buffers."""

    assert_close = staticmethod(assert_close)
    errors = staticmethod(errors)
    tolerance = staticmethod(tolerance)
    grad_tolerance = staticmethod(grad_tolerance)
    release_buffers = staticmethod(release_buffers)

    def __getattr__(self, name):
        from . import torch as kt
        return getattr(kt, name)


try:  # the fixture exists wherever pytest does, whenever this module was imported
    import pytest as _pytest
except ImportError:  # kdalab needs no pytest
    _pytest = None

if _pytest is not None:
    @_pytest.fixture
    def kdalab_ref():
        """kdalab's float64 oracle with fla's signatures (kdalab.torch), and
        kdalab.testing's assert_close, errors, tolerance, grad_tolerance and
        release_buffers."""
        return Reference()
