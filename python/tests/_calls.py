"""Every public function of the module, with the arguments it takes, and an
independent float64 recurrence (REFERENCE.md's table, in NumPy) to check it.

Shared by the pytest files of this folder (not itself a test file).
"""

import inspect
import json
import os
import subprocess
import sys

import numpy as np

import kdalab

TABLE = kdalab._lib.TABLE  # the library's mechanism table: name -> delta, g shape, fla names
# the rows these generic cases build inputs for: all but the DPLR boundary,
# whose a, b and fla signatures test_dplr.py covers
MECHS = tuple(m for m in TABLE if not TABLE[m]["ab"])


def has_g(mech):
    return TABLE[mech]["g"] != kdalab._lib.G_NONE


def g_per_key(mech):
    return TABLE[mech]["g"] == kdalab._lib.G_PER_KEY


# (mechanism, form): (forward, backward), by fla's names from the table
FUNCS = {(m, form): (getattr(kdalab, TABLE[m][key]), getattr(kdalab, TABLE[m][key] + "_bwd"))
         for m in MECHS for form, key in (("chunk", "fla_chunk"),
                                          ("recurrent", "fla_recurrent"))}


def takes(mech, form, arg):
    """Does the forward function of (mech, form) take the keyword arg?"""
    return arg in inspect.signature(FUNCS[(mech, form)][0]).parameters


def make(mech, rng, B, T, H, HV, K, V, dtype=np.float64):
    """Arrays of fla's shapes for mech: a dict q, k, v, g, beta (None where the
    mechanism has none), do, h0, dht; gates in (-2, 0], beta in [0, 1]."""
    def rnd(shape, lo, hi):
        return rng.uniform(lo, hi, shape).astype(dtype)
    a = {"q": rnd((B, T, H, K), -1, 1), "k": rnd((B, T, H, K), -1, 1),
         "v": rnd((B, T, HV, V), -1, 1), "g": None, "beta": None,
         "do": rnd((B, T, HV, V), -1, 1), "h0": rnd((B, HV, K, V), -1, 1),
         "dht": rnd((B, HV, K, V), -1, 1)}
    if has_g(mech):
        a["g"] = rnd((B, T, HV, K) if g_per_key(mech) else (B, T, HV), -2, 0)
    if TABLE[mech]["delta"]:
        a["beta"] = rnd((B, T, HV), 0, 1)
    return a


def positional(mech, a):
    """The positional array arguments of mech's forward: q, k, v[, g][, beta]."""
    args = [a["q"], a["k"], a["v"]]
    if has_g(mech):
        args.append(a["g"])
    if TABLE[mech]["delta"]:
        args.append(a["beta"])
    return args


def forward(mech, form, a, **kw):
    """o, ht of the module's forward (initial_state a['h0'], final state asked)."""
    return FUNCS[(mech, form)][0](*positional(mech, a), initial_state=a["h0"],
                                  output_final_state=True, **kw)


def backward(mech, form, a, **kw):
    return FUNCS[(mech, form)][1](*positional(mech, a), a["do"], dht=a["dht"],
                                  initial_state=a["h0"], **kw)


def l2norm(x):
    """x / sqrt(sum x^2 + 1e-6) per row, as fla's kernels, computed from x / max|x|."""
    x = np.asarray(x, dtype=np.float64)
    m = np.abs(x).max(-1, keepdims=True)
    safe = np.where(m > 0, m, 1.0)
    s = ((x / safe) ** 2).sum(-1, keepdims=True)
    return (x / safe) / np.sqrt(s + 1e-6 / safe ** 2)


def recurrence(mech, a, scale=None, normalize=False, l2=False):
    """The float64 recurrence: o [B, T, HV, V], ht [B, HV, K, V]."""
    q, k, v = (np.asarray(a[n], dtype=np.float64) for n in ("q", "k", "v"))
    B, T, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    G = HV // H
    s = K ** -0.5 if scale is None else scale
    if l2:
        q, k = l2norm(q), l2norm(k)
    o = np.zeros((B, T, HV, V))
    ht = np.zeros((B, HV, K, V))
    for b in range(B):
        for j in range(HV):
            S = np.array(a["h0"][b, j], dtype=np.float64)
            kc = np.zeros(K)
            for t in range(T):
                qt, kt, vt = q[b, t, j // G], k[b, t, j // G], v[b, t, j]
                if g_per_key(mech):
                    S = np.exp(np.asarray(a["g"][b, t, j], dtype=np.float64))[:, None] * S
                elif has_g(mech):
                    S = np.exp(np.float64(a["g"][b, t, j])) * S
                if not TABLE[mech]["delta"]:
                    S = S + np.outer(kt, vt)
                else:
                    S = S + np.float64(a["beta"][b, t, j]) * np.outer(kt, vt - S.T @ kt)
                o[b, t, j] = s * (S.T @ qt)
                if normalize:
                    kc = kc + kt
                    o[b, t, j] /= s * (qt @ kc) + 1e-10
            ht[b, j] = S
    return o, ht


def run_cases(argv, todo, extra_path=()):
    """Run the property cases todo (dicts with an "id") through a child
    interpreter (argv: its command line after the interpreter), which prints
    `start ID` before a case and one JSON result {"id", "status", "msg"}
    after it, so that a crash fails the test naming its case instead of
    killing pytest. Returns {id: result}; every case that failed its
    property is an AssertionError with the first ten."""
    env = dict(os.environ)
    # the child imports the module this interpreter imported
    env["PYTHONPATH"] = os.pathsep.join(list(extra_path) + [
        os.path.dirname(os.path.dirname(kdalab.__file__)), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable] + list(argv),
                          input="".join(json.dumps(c) + "\n" for c in todo),
                          capture_output=True, text=True, env=env, timeout=600)
    results, started = {}, None
    for line in proc.stdout.splitlines():
        if line.startswith("start "):
            started = int(line.split()[1])
        else:
            r = json.loads(line)
            results[r["id"]] = r
    if proc.returncode != 0:
        case = todo[started] if started is not None else None
        raise AssertionError("the child interpreter died (exit %d) on case %s\n%s"
                             % (proc.returncode, json.dumps(case), proc.stderr[-2000:]))
    assert len(results) == len(todo)
    bad = [(todo[i], r["msg"]) for i, r in sorted(results.items()) if r["status"] == "fail"]
    assert not bad, "\n".join("%s: %s" % (json.dumps(c), m) for c, m in bad[:10])
    return results
