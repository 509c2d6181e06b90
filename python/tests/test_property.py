"""A property of every public function, forward and backward: for random
shapes (zero-sized dimensions included), dtypes (float16/32/64, and integer
or boolean arrays, which are refused) and value scales (up to overflow,
with the odd inf or NaN), the call either returns a correct result or raises
a ValueError, never crashes and never returns a non-finite array.

Correct: the forward equals the NumPy float64 recurrence of _calls.py (on
the inputs as float64) to 1e-10 of the largest |o| wherever that recurrence
is finite (huge q, k with the in-kernel L2 norm included); the backward's
directional derivative, sum(grad . d) over a random direction d of every
input, equals the central difference of the recurrence's sum(o . do) +
sum(ht . dht) to 1e-6 relative (step 1e-6: truncation ~1e-12, rounding
~1e-10 of the scale) where the values stay moderate; elsewhere the
gradients must be finite or an error.

The cases run in a child interpreter, so that a crash fails this test (with
the case that caused it) instead of killing pytest. Seeded: the same cases
on every run, a few seconds in all.
"""

import os

import numpy as np

from _calls import MECHS, run_cases

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 20240
N_CASES = 400

CHILD = r'''
import json, sys, traceback
import numpy as np
sys.path.insert(0, %(here)r)
import _calls as C

def directional(mech, a, d, kw, eps=1e-6):
    def f(x):
        o, ht = C.recurrence(mech, x, **kw)
        return (o * x["do"]).sum() + (ht * x["dht"]).sum()
    plus = {n: (None if a[n] is None else a[n] + eps * d[n] if n in d else a[n]) for n in a}
    minus = {n: (None if a[n] is None else a[n] - eps * d[n] if n in d else a[n]) for n in a}
    return (f(plus) - f(minus)) / (2 * eps)

def finite(x):
    return x is None or np.isfinite(x).all()

def run(case):
    rng = np.random.default_rng(case["seed"])
    mech, form, bwd = case["mech"], case["form"], case["bwd"]
    a = C.make(mech, rng, *case["shape"])
    for n, v in a.items():  # value scale, dtype
        if v is None:
            continue
        v = v * case["scale"] if n in ("q", "k", "v", "do", "dht") else v
        if case["poison"] and n == case["poison"][0] and v.size:
            v = v.copy(); v.flat[case["poison"][1] %% v.size] = case["poison"][2]
        a[n] = v.astype(case["dtype"]) if case["dtype"] != "float64" else v
    kw = {}
    if C.takes(mech, form, "normalize"):
        kw["normalize"] = case["normalize"]
    elif case["l2"] and C.takes(mech, form, "use_qk_l2norm_in_kernel"):
        kw["use_qk_l2norm_in_kernel"] = True
    try:
        res = (C.backward if bwd else C.forward)(mech, form, a, scale=case["s"], **kw)
    except ValueError as e:
        return "error", str(e)[:200]
    arrays = list(res) if bwd else list(res)
    if not all(finite(x) for x in arrays):
        return "fail", "success with a non-finite output"
    a64 = {n: (None if v is None else np.asarray(v, dtype=np.float64)) for n, v in a.items()}
    rkw = {"scale": case["s"], "normalize": kw.get("normalize", False),
           "l2": kw.get("use_qk_l2norm_in_kernel", False)}
    if bwd and not case["moderate"]:
        return "ok", "finite (not compared: extreme values)"
    if not bwd:
        with np.errstate(all="ignore"):
            o, ht = C.recurrence(mech, a64, **rkw)
        if not (np.isfinite(o).all() and np.isfinite(ht).all()):
            return "ok", "finite (not compared: the recurrence overflows)"
        tol = 1e-10 * max(1.0, np.abs(o).max() if o.size else 1.0)
        if o.shape != res[0].shape or np.abs(o - res[0]).max(initial=0) > tol:
            return "fail", "o differs from the recurrence by %%g" %% np.abs(o - res[0]).max()
        if np.abs(ht - res[1]).max(initial=0) > 1e-10 * max(1.0, np.abs(ht).max()):
            return "fail", "ht differs from the recurrence"
        return "ok", "matches"
    g = res
    d = {n: rng.standard_normal(a64[n].shape) for n in ("q", "k", "v", "g", "beta", "h0")
         if a64[n] is not None}
    got = sum((getattr(g, gn) * d[n]).sum() for gn, n in
              (("dq", "q"), ("dk", "k"), ("dv", "v"), ("dg", "g"), ("dbeta", "beta"),
               ("dh0", "h0")) if n in d)
    want = directional(mech, a64, d, rkw)
    if abs(got - want) > 1e-6 * max(1.0, abs(want)):
        return "fail", "directional derivative %%r, central difference %%r" %% (got, want)
    return "ok", "matches"

for line in sys.stdin:
    case = json.loads(line)
    print("start %%d" %% case["id"], flush=True)
    try:
        status, msg = run(case)
    except Exception as e:
        status, msg = "fail", "%%s: %%s" %% (type(e).__name__, traceback.format_exc()[-600:])
    print(json.dumps({"id": case["id"], "status": status, "msg": msg}), flush=True)
'''


def cases():
    rng = np.random.default_rng(SEED)
    mechs = MECHS  # every row of the mechanism table
    out = []
    for i in range(N_CASES):
        mech = mechs[i % len(mechs)]
        B, T, H, K, V = (int(rng.integers(lo, hi)) for lo, hi in
                         ((0, 3), (0, 6), (0, 3), (0, 4), (0, 4)))
        T = T if rng.random() < 0.9 else int(rng.integers(6, 65))
        # mostly valid sizes, each dimension zero now and then
        B, H, K, V = (x if rng.random() < 0.15 else max(x, 1) for x in (B, H, K, V))
        G = int(rng.integers(1, 3))
        HV = H * G if rng.random() > 0.1 else 0
        dtype = str(rng.choice(["float64"] * 3 + ["float32", "float16", "int32", "bool"]))
        scale_choice = rng.random()
        scale = 1.0 if scale_choice < 0.55 else float(10.0 ** rng.choice([-200, 40, 160, 300]))
        poison = None
        if rng.random() < 0.08:
            poison = [str(rng.choice(["q", "k", "v", "g", "beta", "do", "h0"])),
                      int(rng.integers(0, 1000)), float(rng.choice([np.inf, -np.inf, np.nan]))]
        out.append({"id": i, "seed": int(rng.integers(0, 2 ** 31)), "mech": mech,
                    "form": str(rng.choice(["chunk", "recurrent"])),
                    "bwd": bool(rng.random() < 0.5), "shape": [B, T, H, HV, K, V],
                    "dtype": dtype, "scale": scale, "poison": poison,
                    "moderate": scale == 1.0 and poison is None,
                    "s": float(rng.choice([0.5, 1.0])) if rng.random() < 0.5 else None,
                    "l2": bool(rng.random() < 0.5),
                    "normalize": bool(rng.random() < 0.3)})
    return out


def test_every_function_is_right_or_refuses():
    results = run_cases(["-c", CHILD % {"here": HERE}], cases())
    kinds = [r["status"] for r in results.values()]
    # the property is not vacuous: both outcomes occur, and most valid cases are compared
    assert kinds.count("ok") >= N_CASES // 4 and kinds.count("error") >= N_CASES // 10
