"""kdalab.torch's property, as test_property.py's for the NumPy functions:
for random shapes, dtypes, views, non-bool switches and autograd paths
(in-place edits, create_graph, retain_graph), every call gives the right
answer or raises the exception that names what is wrong (_torch_cases.py
says exactly what each case expects).

The cases run in a child interpreter, so that a crash fails this test with
the case that caused it. Seeded: the same cases every run, a few seconds.
"""

import os

import numpy as np
import pytest

pytest.importorskip("torch")

from _calls import MECHS, run_cases  # noqa: E402
from _torch_cases import switches  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 20261204
N_CASES = 300
NOT_BOOLS = ["False", "True", "no", "", 0, 1, None, 0.0]


def cases():
    rng = np.random.default_rng(SEED)
    out = []
    for i in range(N_CASES):
        mech = MECHS[i % len(MECHS)]  # every row of the mechanism table
        form = str(rng.choice(["chunk", "recurrent"]))
        B, T, H, K, V = (int(rng.integers(lo, hi)) for lo, hi in
                         ((1, 3), (0, 7), (1, 3), (1, 4), (1, 4)))
        if rng.random() < 0.1:  # now and then an empty dimension, which is refused
            dim = int(rng.integers(4))
            B, H, K, V = (0 if j == dim else x for j, x in enumerate((B, H, K, V)))
        HV = H * int(rng.integers(1, 3))
        bad = rng.random() < 0.1
        switch = None
        if rng.random() < 0.15:
            names = switches(mech, form)
            switch = [names[int(rng.integers(len(names)))],
                      NOT_BOOLS[int(rng.integers(len(NOT_BOOLS)))]]
        out.append({
            "id": i, "seed": int(rng.integers(0, 2 ** 31)), "mech": mech,
            "form": form, "shape": [B, T, H, HV, K, V],
            "dtype": str(rng.choice(["float64"] * 4 + ["float32", "float16", "bfloat16"])),
            "bad_input": str(rng.choice(["q", "k", "v", "beta", "h0"])) if bad else None,
            "bad_dtype": str(rng.choice(["int32", "bool"])),
            "view": str(rng.choice(["plain", "plain", "noncontig", "strided", "neg"])),
            "switch": switch,
            "path": str(rng.choice(["backward", "retain", "create_graph", "inplace"])),
            "normalize": bool(rng.random() < 0.3), "l2": bool(rng.random() < 0.3)})
    return out


def test_every_torch_function_is_right_or_names_the_error():
    results = run_cases([os.path.join(HERE, "_torch_cases.py")], cases(), extra_path=[HERE])
    # not vacuous: right answers on every autograd path, and refusals of each kind
    msgs = [r["msg"] for r in results.values()]
    for path in ("backward", "retain", "create_graph", "inplace"):
        assert sum(m == "%s matches" % path for m in msgs) >= 10, path
    assert sum("in-place edit" in m for m in msgs) >= 5
    assert sum(r["status"] == "error" for r in results.values()) >= N_CASES // 10
