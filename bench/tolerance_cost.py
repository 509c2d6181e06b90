"""bench/tolerance_cost.py — what kdalab.testing's derived tolerances cost at
a kernel writer's size, against the oracle call they sit beside: tolerance()
against the float64 forward (kdalab.chunk_kda), grad_tolerance() against the
float64 backward (kdalab.chunk_kda_bwd), in alternating rounds.

    PYTHONPATH=python KDALAB_LIBRARY=build/libkdalab.so python3 bench/tolerance_cost.py
    ... --T 1024 --reps 7 --precision fp16

Inputs: KDA, B = 2, H = 4, K = V = 128 (the defaults; T = 2048), unit-norm
q and k, g = -exp(N(0, 1) - 3), beta ~ U(0, 1), default trials and margin.
Each row gives the best and the median of --reps rounds after a warm-up,
and the ratio of each to its oracle call (target for tolerance: 2x the
forward at most), with the default trials and with one. The forward is
timed twice: as a user calls it (a fresh o, whose pages glibc takes fresh
or reuses as its heap allows) and writing into arrays kept between calls
(ops._forward's alloc=, as tolerance's oracle does: the forward without
fresh pages, the stricter peer).
"""

import argparse
import time

import numpy as np

import kdalab
import machine  # bench/machine.py: where this ran
import kdalab.testing as kt
from kdalab import _lib, ops


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--B", type=int, default=2)
    ap.add_argument("--T", type=int, default=2048)
    ap.add_argument("--H", type=int, default=4)
    ap.add_argument("--K", type=int, default=128)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--precision", default="bf16", choices=("bf16", "fp16", "fp32"))
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    B, T, H, K = a.B, a.T, a.H, a.K
    unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)  # noqa: E731
    q, k = unit(rng.normal(size=(B, T, H, K))), unit(rng.normal(size=(B, T, H, K)))
    v, do = rng.normal(size=(B, T, H, K)), rng.normal(size=(B, T, H, K))
    g, beta = -np.exp(rng.normal(size=(B, T, H, K)) - 3), rng.uniform(0, 1, (B, T, H))
    p = a.precision
    kept = {}  # the forward's outputs, allocated once: its time without fresh pages

    def forward_kept():
        return ops._forward("kda", _lib.FORM_CHUNK, q, k, v, g, beta, None, None, True, None,
                            alloc=lambda n, s: kept.setdefault(n, np.empty(s)))

    # (name, call, the oracle calls it is compared with)
    jobs = [("forward", lambda: kdalab.chunk_kda(q, k, v, g, beta, output_final_state=True),
             ()),
            ("forward, kept o", forward_kept, ("forward",)),
            ("tolerance", lambda: kt.tolerance("kda", q, k, v, g, beta, precision=p),
             ("forward", "forward, kept o")),
            ("tolerance, 1 trial", lambda: kt.tolerance("kda", q, k, v, g, beta, precision=p,
                                                        trials=1),
             ("forward", "forward, kept o")),
            ("backward", lambda: kdalab.chunk_kda_bwd(q, k, v, g, beta, do), ()),
            ("grad_tolerance", lambda: kt.grad_tolerance("kda", q, k, v, g, beta, do=do,
                                                         precision=p), ("backward",)),
            ("grad_tol., 1 trial", lambda: kt.grad_tolerance("kda", q, k, v, g, beta, do=do,
                                                             precision=p, trials=1),
             ("backward",))]
    times = {name: [] for name, _, _ in jobs}
    for name, f, _ in jobs:  # warm-up: the first call on the thread maps its buffers
        f()
    for _ in range(a.reps):  # alternating rounds: each job sees the same machine
        for name, f, _ in jobs:
            t = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t)
    print("# %s; KDA, B = %d, T = %d, H = %d, K = V = %d, %s, %d rounds"
          % (machine.describe(), B, T, H, K, a.precision, a.reps))
    print("%-20s %10s %10s   %s" % ("call", "best s", "median s", "best x, median x of"))
    for name, _, peers in jobs:
        best, med = min(times[name]), float(np.median(times[name]))
        ratio = "  ".join("%6.2fx %6.2fx %s" % (best / min(times[peer]),
                                                 med / np.median(times[peer]), peer)
                          for peer in peers)
        print("%-20s %10.4f %10.4f   %s" % (name, best, med, ratio))


if __name__ == "__main__":
    main()
