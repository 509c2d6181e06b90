"""bench/oracle_torch.py — the oracle at a kernel writer's scale: what
kdalab.torch.chunk_kda costs, forward and backward in float64, against the
C SIMD kernels' own time for the same work and against PyTorch autograd of a
naive float64 recurrence, in one run.

    PYTHONPATH=python KDALAB_LIBRARY=build/libkdalab.so python3 bench/oracle_torch.py
    ... --quick        (B = 1, T = 2048, H = 4: a minute on 2 cores)

Cases: plain (B = 2, T = 8192, H = 16, K = V = 128) and varlen + GVA (B = 1,
four sequences over T = 8192, H = 8 query/key heads, HV = 16 value heads).
Rows, each the best of `--reps` alternating rounds after a warm-up:
  torch    kdalab.torch.chunk_kda: forward, then o.backward(do) (dL/do = do, as the
           C row's d_o; no loss of its own to compute)
  C        kdalab_run_f64 / kdalab_run_bwd_f64 (the SIMD path) on the same
           float64 arrays through ctypes: the kernels' own time
  naive    PyTorch autograd of the recurrence written from REFERENCE.md (the
           state of every (b, h) advanced together, one position at a time),
           float64, at a shorter T (its graph keeps every step's state:
           memory grows as T K V per head); compared per head-token
The ratio "torch / C" is the door's overhead (target: within 1.25x), and
"outside C" the torch row's seconds outside the library's two calls (timed
around them, best of the rounds): the door's own work; "naive /
torch" is how much faster than the obvious PyTorch reference the oracle is
(per head-token; target: 100x or more).
"""

import argparse
import ctypes
import os
import time

import numpy as np
import torch

import machine  # bench/machine.py: where this ran
import kdalab.torch as kt
from kdalab import _lib


def problem(rng, B, T, H, HV, K, V):
    unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)  # noqa: E731
    return dict(q=unit(rng.normal(size=(B, T, H, K))), k=unit(rng.normal(size=(B, T, H, K))),
                v=rng.normal(size=(B, T, HV, V)), g=-np.exp(rng.normal(size=(B, T, HV, K))) / 8,
                beta=rng.uniform(0, 1, (B, T, HV)), do=rng.normal(size=(B, T, HV, V)))


def torch_door(p, cu):
    t = {n: torch.from_numpy(p[n]).requires_grad_() for n in ("q", "k", "v", "g", "beta")}
    o, _ = kt.chunk_kda(t["q"], t["k"], t["v"], t["g"], t["beta"],
                        cu_seqlens=None if cu is None else torch.from_numpy(cu))
    o.backward(torch.from_numpy(p["do"]))


def c_kernels(p, cu, work):
    """The SIMD path's forward and backward on the same arrays (ctypes)."""
    B, T, H, K = p["q"].shape
    HV, V = p["v"].shape[2:]
    call = _lib.Call(_lib.Dims(B, T, H, K, V), HV, None, 0, _lib.MECHANISMS["kda"], K ** -0.5,
                     _lib.FORM_CHUNK, _lib.IMPLS["simd"], None, work)
    if cu is not None:
        call.cu_seqlens = cu.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))
        call.n_seqs = cu.size - 1
    o = np.empty_like(p["v"])
    fwd = _lib.named(_lib.Tensors, q=p["q"], k=p["k"], v=p["v"], g=p["g"], beta=p["beta"], o=o)
    _lib.check(_lib.lib.kdalab_run_f64(call, fwd, None), "forward")
    grads = {n: np.empty_like(p[n]) for n in ("q", "k", "v", "g", "beta")}
    bwd = _lib.named(_lib.Tensors, q=p["q"], k=p["k"], v=p["v"], g=p["g"], beta=p["beta"],
                     d_o=p["do"], dq=grads["q"], dk=grads["k"], dv=grads["v"], dg=grads["g"],
                     dbeta=grads["beta"])
    _lib.check(_lib.lib.kdalab_run_bwd_f64(call, bwd), "backward")


def naive(p):
    """REFERENCE.md's KDA recurrence in float64 PyTorch, every (b, h) at once,
    differentiated by autograd (GVA: q, k repeated per value head)."""
    G = p["v"].shape[2] // p["q"].shape[2]
    t = {n: torch.from_numpy(np.repeat(p[n], G, 2) if n in ("q", "k") else p[n])
         .requires_grad_() for n in ("q", "k", "v", "g", "beta")}
    B, T, HV, K = t["q"].shape
    V = t["v"].shape[3]
    S = torch.zeros(B, HV, K, V, dtype=torch.float64)
    out = []
    for i in range(T):
        S = torch.exp(t["g"][:, i])[..., None] * S
        k_i = t["k"][:, i]
        e = t["v"][:, i] - torch.einsum("bhkv,bhk->bhv", S, k_i)
        S = S + t["beta"][:, i, :, None, None] * k_i[..., None] * e[..., None, :]
        out.append(K ** -0.5 * torch.einsum("bhkv,bhk->bhv", S, t["q"][:, i]))
    o = torch.stack(out, 1)
    o.backward(torch.from_numpy(p["do"]))


class InLibrary:
    """While active, the seconds spent inside the library's two calls
    (kdalab_run_f64, kdalab_run_bwd_f64) as the module makes them: the door's
    own time is the rest."""

    NAMES = ("kdalab_run_f64", "kdalab_run_bwd_f64")

    def __init__(self):
        self.seconds = 0.0

    def __enter__(self):
        self.saved = {n: getattr(_lib.lib, n) for n in self.NAMES}
        for n, f in self.saved.items():
            setattr(_lib.lib, n, self._timed(f))
        return self

    def __exit__(self, *exc):
        for n, f in self.saved.items():
            setattr(_lib.lib, n, f)

    def _timed(self, f):
        def call(*args):
            t0 = time.perf_counter()
            try:
                return f(*args)
            finally:
                self.seconds += time.perf_counter() - t0
        return call


def door_alone(p, cu):
    """Seconds of one torch_door call spent outside the library calls."""
    with InLibrary() as lib:
        t0 = time.perf_counter()
        torch_door(p, cu)
        return time.perf_counter() - t0 - lib.seconds


def best(fn, reps):
    fn()  # warm-up: first touches, the workspace
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="B = 1, T = 2048, H = 4")
    ap.add_argument("--reps", type=int, default=3, help="timed rounds after a warm-up")
    ap.add_argument("--naive-T", type=int, default=128, help="T of the naive recurrence")
    a = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    rng = np.random.default_rng(0)
    K = V = 128
    if a.quick:
        cases = [("plain", 1, 2048, 4, 4, None), ("varlen+GVA", 1, 2048, 2, 4, [0, 300, 1100, 1500, 2048])]
    else:
        cases = [("plain", 2, 8192, 16, 16, None),
                 ("varlen+GVA", 1, 8192, 8, 16, [0, 1000, 4500, 6000, 8192])]
    print("# %s; torch %s, %d threads; float64, KDA, K = V = %d"
          % (machine.describe(), torch.__version__, torch.get_num_threads(), K))
    print("%-11s %-22s %10s %14s %8s %10s %10s" % ("case", "B, T, H / HV", "seconds", "head-tok/s",
                                                  "torch/C", "naive/torch", "outside C"))
    work = _lib.lib.kdalab_workspace_new()
    for name, B, T, H, HV, cu in cases:
        p = problem(rng, B, T, H, HV, K, V)
        cu = None if cu is None else np.array(cu, dtype=np.int64)
        ht = B * T * HV
        rounds = {"torch": [], "C": [], "outside": []}
        for _ in range(a.reps):  # alternating rounds: the two see the same machine
            rounds["torch"].append(best(lambda: torch_door(p, cu), 1))
            rounds["C"].append(best(lambda: c_kernels(p, cu, work), 1))
            rounds["outside"].append(door_alone(p, cu))
        tt, tc = min(rounds["torch"]), min(rounds["C"])
        pn = problem(rng, B, a.naive_T, H, HV, K, V)
        tn = best(lambda: naive(pn), 1)
        hn = B * a.naive_T * HV
        shape = "%d, %d, %d / %d" % (B, T, H, HV)
        print("%-11s %-22s %10.3f %14.0f %8s %10s %10.3f" % (
            name, shape + " torch", tt, ht / tt, "%.2fx" % (tt / tc), "", min(rounds["outside"])))
        print("%-11s %-22s %10.3f %14.0f" % ("", shape + " C", tc, ht / tc))
        print("%-11s %-22s %10.3f %14.0f %8s %10s" % (
            "", "%d, %d, %d / %d naive" % (B, a.naive_T, H, HV), tn, hn / tn, "",
            "%.0fx" % ((ht / tt) / (hn / tn))))
    _lib.lib.kdalab_workspace_free(work)


if __name__ == "__main__":
    main()
